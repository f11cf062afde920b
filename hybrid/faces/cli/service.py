"""Run ``hybrid serve`` in the background: a systemd user unit (Linux) or a launchd LaunchAgent
(macOS), written from the package's templates and enabled with ``systemctl`` / ``launchctl``.

Templates. ``hybrid/templates/hybrid.service`` and ``hybrid/templates/com.hybrid.server.plist``
are package data (read with ``importlib.resources``, so an installed wheel has them too). They
hold placeholders of the form ``@@name@@`` -- a syntax that clashes with neither systemd (``%``
specifiers, ``$`` variables) nor XML. A placeholder alone on its line whose value is empty removes
the line. Substitution is one pass, so a value that happens to contain ``@@...@@`` is left as it
is.

- ``hybrid.service``: ``@@exec_start@@`` (the quoted command line), ``@@working_directory@@``,
  ``@@environment@@`` (zero or more ``Environment="KEY=value"`` lines).
- ``com.hybrid.server.plist``: ``@@program_arguments@@`` (``<string>`` elements),
  ``@@environment@@`` (``<key>``/``<string>`` pairs of the EnvironmentVariables dict),
  ``@@log_path@@`` (StandardOutPath and StandardErrorPath).

Installing never raises for a missing or failing service manager (no ``systemctl``, no user
session in a container, no GUI domain over SSH): the file is written and the returned
``InstallResult`` says so and names the exact command to run. ``home``, ``system`` and ``runner``
parameters let tests use a temporary home, pretend to be another platform and fake
``systemctl``/``launchctl``.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from xml.sax.saxutils import escape as _xml_escape

UNIT_NAME = "hybrid.service"
LABEL = "com.hybrid.server"
SYSTEMD_TEMPLATE_NAME = "hybrid.service"
LAUNCHD_TEMPLATE_NAME = "com.hybrid.server.plist"
DEFAULT_PORT = 8765
DEFAULT_HOST = "127.0.0.1"

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]

_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER_RE = re.compile(r"(?m)^@@(\w+)@@\n|@@(\w+)@@")
_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass
class InstallResult:
    path: Path | None  # the unit / plist file (None on an unsupported platform)
    ok: bool           # everything asked for was done
    message: str       # one or two lines; the second names the next step


# --- what to run ------------------------------------------------------------------------------
def service_args(http: bool = False, watch: bool = False, port: int = DEFAULT_PORT,
                 host: str = DEFAULT_HOST) -> list[str]:
    """The arguments after the executable: ``serve [--http --port N --host H] [--watch]``."""
    args = ["serve"]
    if http:
        args += ["--http", "--port", str(int(port)), "--host", str(host)]
    if watch:
        args.append("--watch")
    return args


def executable() -> list[str]:
    """How to run hybrid: the ``hybrid`` console script next to the running interpreter
    (absolute path, symlinks kept so a venv stays a venv), else ``python -m hybrid``."""
    bindir = Path(sys.executable).absolute().parent
    for name in ("hybrid.exe", "hybrid") if os.name == "nt" else ("hybrid",):
        script = bindir / name
        if script.is_file():
            return [str(script)]
    return [str(Path(sys.executable).absolute()), "-m", "hybrid"]


# --- rendering --------------------------------------------------------------------------------
def template(name: str) -> str:
    """The service template ``name``: package data under ``hybrid/templates/``."""
    return resources.files("hybrid").joinpath("templates", name).read_text(encoding="utf-8")


def _fill(text: str, values: Mapping[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in values:
            raise KeyError(f"service template placeholder @@{name}@@ has no value")
        value = values[name]
        if m.group(1) is not None:  # a placeholder alone on its line
            return value + "\n" if value else ""
        return value
    return _PLACEHOLDER_RE.sub(repl, text)


def _check_env(env: Mapping[str, str]) -> None:
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_KEY_RE.match(key):
            raise ValueError(f"bad environment variable name {key!r}")
        if not isinstance(value, str):
            raise ValueError(f"environment variable {key} must be a string, got {value!r}")


def _c_escape(s: str) -> str:
    """Backslash-escape for a double-quoted systemd word (systemd applies C unescaping)."""
    s = s.replace("\\", "\\\\").replace('"', '\\"')
    return s.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def systemd_quote(arg: str) -> str:
    """One word of an ``ExecStart=`` line: ``%`` -> ``%%`` (specifiers), ``$`` -> ``$$``
    (variable expansion), and double quotes with ``\\`` / ``"`` escaped when the word contains
    whitespace, quotes, backslashes or ``;`` (or is empty)."""
    if arg == "" or re.search(r"[\s\"'\\;]", arg):
        arg = f'"{_c_escape(arg)}"'
    return arg.replace("%", "%%").replace("$", "$$")


def systemd_environment(env: Mapping[str, str]) -> str:
    """``Environment="KEY=value"`` lines (no ``$`` expansion happens in Environment=)."""
    _check_env(env)
    return "\n".join(f'Environment="{_c_escape(f"{k}={v}")}"'.replace("%", "%%")
                     for k, v in env.items())


def render_systemd(args: list[str], env: dict[str, str], *, program: Sequence[str] | None = None,
                   working_directory: str | os.PathLike[str] = "~") -> str:
    """The systemd user unit running ``program + args`` (``program`` defaults to
    ``executable()``) with ``env``; ``~`` as working directory is the user's home."""
    argv = list(program if program is not None else executable()) + list(args)
    workdir = str(working_directory)
    if "\n" in workdir:
        raise ValueError("working directory contains a newline")
    return _fill(template(SYSTEMD_TEMPLATE_NAME), {
        "exec_start": " ".join(systemd_quote(a) for a in argv),
        "working_directory": workdir.replace("%", "%%"),
        "environment": systemd_environment(env),
    })


def _xml(s: str) -> str:
    if _XML_INVALID_RE.search(s):
        raise ValueError(f"{s!r} contains a character that cannot appear in a plist")
    return _xml_escape(s).replace("\r", "&#13;")


def render_launchd(args: list[str], env: dict[str, str], log_path: Path, *,
                   program: Sequence[str] | None = None) -> str:
    """The LaunchAgent plist running ``program + args`` (``program`` defaults to
    ``executable()``) with ``env``, stdout and stderr appended to ``log_path``."""
    _check_env(env)
    argv = list(program if program is not None else executable()) + list(args)
    return _fill(template(LAUNCHD_TEMPLATE_NAME), {
        "program_arguments": "\n".join(f"    <string>{_xml(a)}</string>" for a in argv),
        "environment": "\n".join(f"    <key>{_xml(k)}</key>\n    <string>{_xml(v)}</string>"
                                 for k, v in env.items()),
        "log_path": _xml(str(log_path)),
    })


# --- where things go --------------------------------------------------------------------------
def _system(system: str | None) -> str:
    return system or platform.system()


def unit_path(system: str | None = None, home: Path | None = None) -> Path | None:
    """Where the service file goes: ``$XDG_CONFIG_HOME/systemd/user/hybrid.service`` (else
    ``~/.config/...``) on Linux, ``~/Library/LaunchAgents/com.hybrid.server.plist`` on macOS,
    None elsewhere. With an explicit ``home`` (tests), everything is under that home and
    ``XDG_CONFIG_HOME`` is not consulted."""
    system = _system(system)
    if system == "Linux":
        xdg = os.environ.get("XDG_CONFIG_HOME", "") if home is None else ""
        config = Path(xdg) if xdg and os.path.isabs(xdg) else (home or Path.home()) / ".config"
        return config / "systemd" / "user" / UNIT_NAME
    if system == "Darwin":
        return (home or Path.home()) / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    return None


def log_path(home: Path | None = None) -> Path:
    """The launchd agent's log file (systemd logs go to the journal)."""
    return (home or Path.home()) / "Library" / "Logs" / "hybrid" / "server.log"


def service_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` plus ``HYBRID_HOME`` from this process when set (an explicit value wins), with
    ``HYBRID_HOME`` made absolute: the service does not start in this directory."""
    out = dict(env or {})
    if "HYBRID_HOME" not in out and os.environ.get("HYBRID_HOME"):
        out["HYBRID_HOME"] = os.environ["HYBRID_HOME"]
    if out.get("HYBRID_HOME"):
        out["HYBRID_HOME"] = str(Path(out["HYBRID_HOME"]).expanduser().resolve())
    _check_env(out)
    return out


# --- running systemctl / launchctl ------------------------------------------------------------
def _default_runner(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)


def _first_line(*texts: object) -> str:
    for t in texts:
        if isinstance(t, bytes):
            t = t.decode("utf-8", "replace")
        if isinstance(t, str) and t.strip():
            return t.strip().splitlines()[0].strip()
    return ""


def _call(runner: Runner, cmd: list[str]) -> tuple[int | None, str, str]:
    """(returncode, stdout, problem): returncode None when the command could not run at all."""
    try:
        proc = runner(cmd)
    except FileNotFoundError:
        return None, "", f"{cmd[0]} not found"
    except subprocess.TimeoutExpired:
        return None, "", f"`{shlex.join(cmd)}` timed out"
    except OSError as exc:
        return None, "", f"`{shlex.join(cmd)}` could not run: {exc}"
    rc = int(getattr(proc, "returncode", 0) or 0)
    out = getattr(proc, "stdout", "") or ""
    if isinstance(out, bytes):
        out = out.decode("utf-8", "replace")
    problem = ""
    if rc != 0:
        detail = _first_line(getattr(proc, "stderr", ""), out)
        problem = f"`{shlex.join(cmd)}` exited {rc}" + (f": {detail}" if detail else "")
    return rc, out, problem


def _steps(runner: Runner, cmds: list[list[str]]) -> str:
    """Run the commands in order; the first problem, or '' when all succeeded."""
    for cmd in cmds:
        _, _, problem = _call(runner, cmd)
        if problem:
            return problem
    return ""


def _write(path: Path, text: str) -> None:
    """Atomic write, readable by the user only (the environment may hold HYBRID_TOKEN)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _unsupported(system: str) -> InstallResult:
    return InstallResult(None, False,
                         f"background services are supported on Linux (systemd) and macOS "
                         f"(launchd), not on {system or 'this platform'}\n"
                         f"run `hybrid serve --http --watch` from your own startup task instead")


def _systemctl(*args: str) -> list[str]:
    return ["systemctl", "--user", *args]


def _gui(uid: int | None = None) -> str:
    return f"gui/{os.getuid() if uid is None else uid}"


# --- install / uninstall / status -------------------------------------------------------------
def install(http: bool = True, watch: bool = True, port: int = DEFAULT_PORT,
            host: str = DEFAULT_HOST, env: dict[str, str] | None = None, *,
            home: Path | None = None, system: str | None = None,
            runner: Runner | None = None) -> InstallResult:
    """Write the service file for this platform and start it (re-installing restarts it with the
    new settings). A missing or failing systemctl/launchctl leaves the file written and returns
    ok=False with the command to run."""
    system = _system(system)
    path = unit_path(system, home)
    if path is None:
        return _unsupported(system)
    runner = runner or _default_runner
    args = service_args(http, watch, port, host)
    environment = service_env(env)
    existed = path.exists()
    where = f"MCP at http://{host}:{port}/mcp" if http else "stdio MCP server"
    if system == "Linux":
        _write(path, render_systemd(args, environment))
        cmds = [_systemctl("daemon-reload"), _systemctl("enable", "--now", UNIT_NAME)]
        if existed:
            cmds.append(_systemctl("restart", UNIT_NAME))
        problem = _steps(runner, cmds)
        if problem:
            return InstallResult(path, False,
                                 f"wrote {path}, but could not start it: {problem}\n"
                                 f"run: {' && '.join(shlex.join(c) for c in cmds)}")
        return InstallResult(path, True,
                             f"{'re' if existed else ''}installed and started {UNIT_NAME} ({where}): "
                             f"{path}\nlogs: journalctl --user -u {UNIT_NAME} -f; to keep it running "
                             f"after you log out: loginctl enable-linger")
    # Darwin
    logfile = log_path(home)
    logfile.parent.mkdir(parents=True, exist_ok=True)
    _write(path, render_launchd(args, environment, logfile))
    if existed:  # an agent loaded from the old file must go first, or bootstrap fails
        _call(runner, ["launchctl", "bootout", f"{_gui()}/{LABEL}"])
    cmd = ["launchctl", "bootstrap", _gui(), str(path)]
    problem = _steps(runner, [cmd])
    if problem:
        return InstallResult(path, False, f"wrote {path}, but could not load it: {problem}\n"
                                          f"run: {shlex.join(cmd)}")
    return InstallResult(path, True,
                         f"{'re' if existed else ''}installed and started {LABEL} ({where}): {path}\n"
                         f"logs: {logfile}")


def uninstall(*, home: Path | None = None, system: str | None = None,
              runner: Runner | None = None) -> InstallResult:
    """Stop the service and remove its file. A missing or failing systemctl/launchctl still
    removes the file and returns ok=False with the command that stops a running service."""
    system = _system(system)
    path = unit_path(system, home)
    if path is None:
        return _unsupported(system)
    runner = runner or _default_runner
    if system == "Linux":
        wants = path.parent / "default.target.wants" / UNIT_NAME
        if not path.exists() and not wants.is_symlink():
            return InstallResult(path, True, f"{UNIT_NAME} is not installed (no {path})")
        problem = _steps(runner, [_systemctl("disable", "--now", UNIT_NAME)])
        path.unlink(missing_ok=True)
        if wants.is_symlink():  # what `enable` made, should `disable` not have run
            wants.unlink()
        if problem:
            return InstallResult(path, False,
                                 f"removed {path}, but could not stop the service: {problem}\n"
                                 f"if it is still running, run: systemctl --user stop {UNIT_NAME} "
                                 f"&& systemctl --user daemon-reload")
        problem = _steps(runner, [_systemctl("daemon-reload")])
        if problem:
            return InstallResult(path, False, f"stopped and removed {UNIT_NAME} ({path}), but: "
                                              f"{problem}\nrun: systemctl --user daemon-reload")
        return InstallResult(path, True, f"stopped and removed {UNIT_NAME} ({path})")
    # Darwin
    if not path.exists():
        return InstallResult(path, True, f"{LABEL} is not installed (no {path})")
    cmd = ["launchctl", "bootout", f"{_gui()}/{LABEL}"]
    rc, out, problem = _call(runner, cmd)
    if rc is not None and problem and re.search(r"no such process|could not find|not find specified",
                                                problem, re.I):
        problem = ""  # it was not loaded: nothing to stop
    path.unlink(missing_ok=True)
    if problem:
        return InstallResult(path, False, f"removed {path}, but could not stop the agent: {problem}\n"
                                          f"if it is still running, run: {shlex.join(cmd)}")
    return InstallResult(path, True, f"stopped and removed {LABEL} ({path})")


def status(*, home: Path | None = None, system: str | None = None,
           runner: Runner | None = None) -> InstallResult:
    """Whether the service file exists and what the service manager says about it; ok when it
    is installed and running."""
    system = _system(system)
    path = unit_path(system, home)
    if path is None:
        return _unsupported(system)
    runner = runner or _default_runner
    installed = path.exists()
    first = f"installed: {path}" if installed else f"not installed (no {path})"
    if system == "Linux":
        cmd = _systemctl("is-active", UNIT_NAME)
        rc, out, problem = _call(runner, cmd)
        state = _first_line(out)  # is-active prints the state and exits non-zero unless active
        if rc is None:
            shown, running = problem, False
        else:
            shown = state or problem.replace(f"`{shlex.join(cmd)}` ", "", 1) or f"exited {rc}"
            running = rc == 0 and state in ("active", "")
        line1 = f"{first}; {shlex.join(cmd)}: {shown}"
        if not installed:
            nxt = "install it with: hybrid service install"
        elif running:
            nxt = f"logs: journalctl --user -u {UNIT_NAME} -f"
        else:
            nxt = (f"start it with: systemctl --user enable --now {UNIT_NAME}; "
                   f"logs: journalctl --user -u {UNIT_NAME}")
        return InstallResult(path, installed and running, f"{line1}\n{nxt}")
    # Darwin
    cmd = ["launchctl", "print", f"{_gui()}/{LABEL}"]
    rc, out, problem = _call(runner, cmd)
    if rc is None:
        shown, running = problem, False
    elif rc != 0:
        shown, running = "not loaded", False
    else:
        found = re.search(r"^\s*state = (.+)$", out, re.M)
        pid = re.search(r"^\s*pid = (\d+)$", out, re.M)
        running = found is None or found.group(1).strip() == "running"
        shown = "loaded" + (f", state = {found.group(1).strip()}" if found else "") \
                + (f", pid = {pid.group(1)}" if pid else "")
    line1 = f"{first}; {shlex.join(cmd)}: {shown}"
    if not installed:
        nxt = "install it with: hybrid service install"
    elif running:
        nxt = f"logs: {log_path(home)}"
    else:
        nxt = f"load it with: launchctl bootstrap {_gui()} {shlex.quote(str(path))}"
    return InstallResult(path, installed and running, f"{line1}\n{nxt}")
