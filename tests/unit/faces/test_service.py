"""hybrid.faces.cli.service: rendering the systemd unit and launchd plist, and install/uninstall/status
with a temporary home and a fake systemctl/launchctl (nothing here touches ~/.config or runs a
real service manager)."""

import configparser
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hybrid.faces.cli import service
from hybrid.faces.cli.service import (
    InstallResult,
    executable,
    install,
    render_launchd,
    render_systemd,
    service_args,
    status,
    uninstall,
)

TRICKY = ["a b", "100%", "$HOME", 'say "hi"', "back\\slash", ";", "", "it's", "tab\there", "%h"]


@pytest.fixture(autouse=True)
def no_xdg(monkeypatch):
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)


class FakeRunner:
    """Records commands; answers from a dict of (cmd prefix tuple) -> (rc, stdout, stderr)."""

    def __init__(self, answers=None, missing=False):
        self.calls: list[list[str]] = []
        self.answers = answers or {}
        self.missing = missing

    def __call__(self, cmd):
        self.calls.append(list(cmd))
        if self.missing:
            raise FileNotFoundError(cmd[0])
        for prefix, (rc, out, err) in self.answers.items():
            if tuple(cmd[:len(prefix)]) == prefix:
                return subprocess.CompletedProcess(cmd, rc, out, err)
        return subprocess.CompletedProcess(cmd, 0, "", "")


def systemd_split(line: str) -> list[str]:
    """Reference reading of an ExecStart= value: whitespace-separated words, double quotes with
    C escapes, %% -> %, $$ -> $ (what systemd does for the characters we emit)."""
    words, i, n = [], 0, len(line)
    unesc = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}
    while i < n:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quoted = "", False
        while i < n and (quoted or line[i] not in " \t"):
            c = line[i]
            if c == '"':
                quoted = not quoted
            elif c == "\\" and quoted:
                i += 1
                word += unesc[line[i]]
            elif c in "%$":
                assert line[i + 1] == c, f"unescaped {c} in {line!r}"
                word += c
                i += 1
            else:
                assert quoted or c not in "'\\;", f"unquoted {c!r} in {line!r}"
                word += c
            i += 1
        assert not quoted, f"unbalanced quotes in {line!r}"
        words.append(word)
    return words


def parse_unit(text: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read_string(text)
    return cp


# --- arguments and rendering ----------------------------------------------------------------
def test_service_args():
    assert service_args(False, False, 8765, "127.0.0.1") == ["serve"]
    assert service_args(False, True, 8765, "127.0.0.1") == ["serve", "--watch"]
    assert service_args(True, True, 9000, "0.0.0.0") == [
        "serve", "--http", "--port", "9000", "--host", "0.0.0.0", "--watch"]


def test_executable_is_the_console_script_or_module():
    exe = executable()
    script = Path(sys.executable).absolute().parent / "hybrid"
    if script.is_file():
        assert exe == [str(script)]
    else:
        assert exe == [str(Path(sys.executable).absolute()), "-m", "hybrid"]
    assert Path(exe[0]).is_absolute() and Path(exe[0]).exists()


def test_executable_fallback_and_script(tmp_path, monkeypatch):
    bindir = tmp_path / "env bin"
    bindir.mkdir()
    monkeypatch.setattr(sys, "executable", str(bindir / "python"))
    assert executable() == [str(bindir / "python"), "-m", "hybrid"]
    (bindir / "hybrid").write_text("#!/bin/sh\n")
    assert executable() == [str(bindir / "hybrid")]


def test_render_systemd_parses():
    args = service_args(True, True, 8765, "127.0.0.1")
    text = render_systemd(args, {"HYBRID_HOME": "/data/hybrid home"})
    cp = parse_unit(text)
    assert cp.sections() == ["Unit", "Service", "Install"]
    assert cp["Unit"]["Description"]
    svc = cp["Service"]
    assert svc["Type"] == "simple"
    assert svc["Restart"] == "on-failure"
    assert svc["RestartSec"] == "5"
    assert svc["NoNewPrivileges"] == "yes"
    assert svc["WorkingDirectory"] == "~"
    assert svc["Environment"] == '"HYBRID_HOME=/data/hybrid home"'
    assert cp["Install"]["WantedBy"] == "default.target"
    exec_start = svc["ExecStart"]
    assert "serve --http --port 8765" in exec_start and "--watch" in exec_start
    assert systemd_split(exec_start) == executable() + [
        "serve", "--http", "--port", "8765", "--host", "127.0.0.1", "--watch"]
    assert executable()[0] in exec_start
    assert "@@" not in text


def test_render_systemd_without_env_has_no_environment_line():
    text = render_systemd(["serve"], {})
    assert "Environment" not in text and "@@" not in text
    assert "\n\n\n" not in text
    assert systemd_split(parse_unit(text)["Service"]["ExecStart"]) == executable() + ["serve"]


def test_systemd_quoting_of_spaces_percent_and_friends():
    text = render_systemd(["serve", *TRICKY], {"A": 'x "y" 50% \\ $Z'},
                          program=["/opt/my apps/hybrid"])
    svc = parse_unit(text)["Service"]
    exec_start = svc["ExecStart"]
    assert exec_start.startswith('"/opt/my apps/hybrid" serve "a b" 100%% $$HOME ')
    assert systemd_split(exec_start) == ["/opt/my apps/hybrid", "serve", *TRICKY]
    # Environment=: quoted, %-doubled, backslash and quote escaped, $ left alone
    assert svc["Environment"] == '"A=x \\"y\\" 50%% \\\\ $Z"'


def test_render_systemd_rejects_bad_env_names():
    with pytest.raises(ValueError):
        render_systemd(["serve"], {"BAD NAME": "x"})


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
@pytest.mark.slow
def test_systemd_analyze_verify(tmp_path):
    text = render_systemd(["-c", "pass", *TRICKY], {"HYBRID_HOME": str(tmp_path / "h h"), "X": "1%"},
                          program=[sys.executable])
    unit = tmp_path / "hybrid.service"
    unit.write_text(text, encoding="utf-8")
    env = dict(os.environ)
    if not env.get("XDG_RUNTIME_DIR"):  # containers: the user manager needs a runtime dir
        runtime = tmp_path / "runtime"
        runtime.mkdir(mode=0o700)
        env["XDG_RUNTIME_DIR"] = str(runtime)
    proc = subprocess.run(["systemd-analyze", "verify", "--user", str(unit)], env=env,
                          capture_output=True, text=True, timeout=60)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 and ("Failed to initialize manager" in output
                                 or "Failed to lookup RuntimeDirectory" in output):
        pytest.skip(f"systemd-analyze cannot run a user manager here: {output.strip()}")
    assert proc.returncode == 0, output
    assert "hybrid.service" not in output, output  # no warnings about our unit


def test_render_launchd_parses(tmp_path):
    args = service_args(True, True, 8765, "127.0.0.1")
    log = tmp_path / "Logs" / "server & co.log"
    data = plistlib.loads(render_launchd(args, {"HYBRID_HOME": "/x/<h>"}, log).encode())
    assert data["Label"] == "com.hybrid.server"
    assert data["ProgramArguments"] == executable() + args
    assert data["RunAtLoad"] is True and data["KeepAlive"] is True
    assert data["StandardOutPath"] == data["StandardErrorPath"] == str(log)
    assert data["EnvironmentVariables"] == {"HYBRID_HOME": "/x/<h>"}


def test_launchd_escaping_and_empty_env(tmp_path):
    text = render_launchd(["serve", *TRICKY, "<&>"], {}, tmp_path / "l.log", program=["/a b/hybrid"])
    assert "@@" not in text
    data = plistlib.loads(text.encode())
    assert data["ProgramArguments"] == ["/a b/hybrid", "serve", *TRICKY, "<&>"]
    assert data["EnvironmentVariables"] == {}


def test_templates_are_package_data():
    """The templates ship inside the package (a wheel has no service/ folder), read through
    importlib.resources, and every placeholder in them gets a value when rendered."""
    from importlib import resources
    for name in (service.SYSTEMD_TEMPLATE_NAME, service.LAUNCHD_TEMPLATE_NAME):
        packaged = resources.files("hybrid").joinpath("templates", name).read_text(encoding="utf-8")
        assert service.template(name) == packaged and "@@environment@@" in packaged
    assert "@@" not in render_systemd(["serve"], {"A": "b"})
    assert "@@" not in render_launchd(["serve"], {"A": "b"}, Path("/l"))


def test_placeholder_values_are_not_substituted_again():
    text = render_systemd(["@@environment@@"], {"A": "@@exec_start@@"})
    svc = parse_unit(text)["Service"]
    assert systemd_split(svc["ExecStart"])[-1] == "@@environment@@"
    assert svc["Environment"] == '"A=@@exec_start@@"'


# --- install / uninstall / status -----------------------------------------------------------
def test_install_linux(tmp_path, hybrid_home):
    run = FakeRunner()
    r = install(True, True, 8765, "127.0.0.1", {"HYBRID_TOKEN": "s3cret"},
                home=tmp_path, system="Linux", runner=run)
    unit = tmp_path / ".config" / "systemd" / "user" / "hybrid.service"
    assert isinstance(r, InstallResult) and r.ok, r.message
    assert r.path == unit and unit.is_file()
    assert oct(unit.stat().st_mode & 0o777) == "0o600"  # it may hold a token
    assert run.calls == [["systemctl", "--user", "daemon-reload"],
                         ["systemctl", "--user", "enable", "--now", "hybrid.service"]]
    svc = parse_unit(unit.read_text())["Service"]
    assert "serve --http --port 8765" in svc["ExecStart"]
    text = unit.read_text()
    # HYBRID_HOME (set by the conftest fixture) is passed on, made absolute
    assert f'Environment="HYBRID_HOME={hybrid_home.resolve()}"' in text
    assert 'Environment="HYBRID_TOKEN=s3cret"' in text
    assert 1 <= len(r.message.splitlines()) <= 2 and "journalctl" in r.message
    assert not list(tmp_path.rglob("*.tmp"))

    # re-install: restarted so the new settings apply
    run = FakeRunner()
    r = install(False, True, 8765, "127.0.0.1", {}, home=tmp_path, system="Linux", runner=run)
    assert r.ok and run.calls[-1] == ["systemctl", "--user", "restart", "hybrid.service"]
    assert "--http" not in parse_unit(unit.read_text())["Service"]["ExecStart"]
    assert "reinstalled" in r.message


def test_relative_hybrid_home_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYBRID_HOME", "rel-home")
    r = install(True, False, 8765, "127.0.0.1", {}, home=tmp_path, system="Linux", runner=FakeRunner())
    assert f'Environment="HYBRID_HOME={tmp_path.resolve() / "rel-home"}"' in r.path.read_text()


def test_no_hybrid_home_no_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("HYBRID_HOME")
    r = install(True, False, 8765, "127.0.0.1", {}, home=tmp_path, system="Linux", runner=FakeRunner())
    assert "Environment=" not in r.path.read_text()


def test_install_linux_respects_xdg_config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    r = install(True, True, 8765, "127.0.0.1", {}, system="Linux", runner=FakeRunner())
    assert r.ok and r.path == tmp_path / "xdg" / "systemd" / "user" / "hybrid.service"
    assert r.path.is_file()


def test_install_linux_without_systemctl(tmp_path):
    r = install(True, True, 8765, "127.0.0.1", {}, home=tmp_path, system="Linux",
                runner=FakeRunner(missing=True))
    assert not r.ok and r.path.is_file()
    assert "systemctl not found" in r.message
    assert "systemctl --user daemon-reload && systemctl --user enable --now hybrid.service" in r.message
    assert len(r.message.splitlines()) == 2 and "Traceback" not in r.message


def test_install_linux_without_user_session(tmp_path):
    run = FakeRunner({("systemctl", "--user", "daemon-reload"):
                      (1, "", "Failed to connect to bus: No medium found\n")})
    r = install(True, True, 8765, "127.0.0.1", {}, home=tmp_path, system="Linux", runner=run)
    assert not r.ok and r.path.is_file()
    assert "Failed to connect to bus" in r.message
    assert "run: systemctl --user daemon-reload && systemctl --user enable --now hybrid.service" \
        in r.message
    assert len(run.calls) == 1  # stops at the first failure


def test_uninstall_and_status_linux(tmp_path):
    unit = tmp_path / ".config" / "systemd" / "user" / "hybrid.service"
    r = status(home=tmp_path, system="Linux",
               runner=FakeRunner({("systemctl",): (3, "inactive\n", "")}))
    assert not r.ok and "not installed" in r.message and "hybrid service install" in r.message

    install(True, True, 8765, "127.0.0.1", {}, home=tmp_path, system="Linux", runner=FakeRunner())
    run = FakeRunner({("systemctl",): (0, "active\n", "")})
    r = status(home=tmp_path, system="Linux", runner=run)
    assert r.ok and r.path == unit
    assert run.calls == [["systemctl", "--user", "is-active", "hybrid.service"]]
    assert "installed" in r.message and "active" in r.message

    r = status(home=tmp_path, system="Linux", runner=FakeRunner({("systemctl",): (3, "failed\n", "")}))
    assert not r.ok and "failed" in r.message and "enable --now" in r.message
    r = status(home=tmp_path, system="Linux", runner=FakeRunner(missing=True))
    assert not r.ok and "systemctl not found" in r.message and "installed:" in r.message

    # what `systemctl enable` would have made
    wants = unit.parent / "default.target.wants" / "hybrid.service"
    wants.parent.mkdir()
    wants.symlink_to(unit)
    run = FakeRunner()
    r = uninstall(home=tmp_path, system="Linux", runner=run)
    assert r.ok, r.message
    assert not unit.exists() and not wants.is_symlink()
    assert run.calls == [["systemctl", "--user", "disable", "--now", "hybrid.service"],
                         ["systemctl", "--user", "daemon-reload"]]
    r = uninstall(home=tmp_path, system="Linux", runner=FakeRunner())
    assert r.ok and "not installed" in r.message


def test_uninstall_linux_without_systemctl(tmp_path):
    install(True, True, 8765, "127.0.0.1", {}, home=tmp_path, system="Linux", runner=FakeRunner())
    r = uninstall(home=tmp_path, system="Linux", runner=FakeRunner(missing=True))
    assert not r.ok and not r.path.exists()
    assert "systemctl --user stop hybrid.service" in r.message


def test_install_uninstall_status_darwin(tmp_path):
    uid = os.getuid()
    run = FakeRunner()
    r = install(True, True, 8765, "127.0.0.1", {"HYBRID_TOKEN": "t"}, home=tmp_path,
                system="Darwin", runner=run)
    plist = tmp_path / "Library" / "LaunchAgents" / "com.hybrid.server.plist"
    assert r.ok, r.message
    assert r.path == plist and plist.is_file()
    assert run.calls == [["launchctl", "bootstrap", f"gui/{uid}", str(plist)]]
    data = plistlib.loads(plist.read_bytes())
    assert data["ProgramArguments"] == executable() + service_args(True, True, 8765, "127.0.0.1")
    assert data["EnvironmentVariables"]["HYBRID_TOKEN"] == "t"
    assert "HYBRID_HOME" in data["EnvironmentVariables"]
    log = Path(data["StandardOutPath"])
    assert log.parent.is_dir() and tmp_path in log.parents

    # re-install: the loaded agent is booted out first
    run = FakeRunner()
    assert install(True, False, 8765, "127.0.0.1", {}, home=tmp_path, system="Darwin", runner=run).ok
    assert run.calls == [["launchctl", "bootout", f"gui/{uid}/com.hybrid.server"],
                         ["launchctl", "bootstrap", f"gui/{uid}", str(plist)]]

    out = "gui/501/com.hybrid.server = {\n\tactive count = 1\n\tstate = running\n\tpid = 4242\n}\n"
    run = FakeRunner({("launchctl", "print"): (0, out, "")})
    r = status(home=tmp_path, system="Darwin", runner=run)
    assert r.ok and "state = running" in r.message and "pid = 4242" in r.message
    assert run.calls == [["launchctl", "print", f"gui/{uid}/com.hybrid.server"]]
    r = status(home=tmp_path, system="Darwin", runner=FakeRunner({("launchctl",): (113, "", "x")}))
    assert not r.ok and "not loaded" in r.message and "launchctl bootstrap" in r.message

    run = FakeRunner()
    r = uninstall(home=tmp_path, system="Darwin", runner=run)
    assert r.ok and not plist.exists()
    assert run.calls == [["launchctl", "bootout", f"gui/{uid}/com.hybrid.server"]]


def test_darwin_without_launchctl(tmp_path):
    r = install(True, True, 8765, "127.0.0.1", {}, home=tmp_path, system="Darwin",
                runner=FakeRunner(missing=True))
    assert not r.ok and r.path.is_file()
    assert "launchctl not found" in r.message
    assert f"run: launchctl bootstrap gui/{os.getuid()} {r.path}" in r.message


def test_darwin_bootout_of_unloaded_agent_is_fine(tmp_path):
    install(True, True, 8765, "127.0.0.1", {}, home=tmp_path, system="Darwin", runner=FakeRunner())
    run = FakeRunner({("launchctl", "bootout"): (3, "", "Boot-out failed: 3: No such process")})
    r = uninstall(home=tmp_path, system="Darwin", runner=run)
    assert r.ok and not r.path.exists()


def test_unsupported_platform(tmp_path):
    run = FakeRunner()
    for fn in (lambda: install(True, True, 8765, "127.0.0.1", {}, home=tmp_path, system="Windows",
                               runner=run),
               lambda: uninstall(home=tmp_path, system="Windows", runner=run),
               lambda: status(home=tmp_path, system="Windows", runner=run)):
        r = fn()
        assert not r.ok and r.path is None and "Windows" in r.message
    assert run.calls == [] and not any(tmp_path.iterdir())
