"""perf_ab.py's two sides: each checkout (a directory as it is, or a git revision checked out
with `git worktree add --detach` into a temporary directory), how its commands run (`python -m
hybrid.cli` with PYTHONPATH=<checkout> from an empty directory, this environment's HYBRID_*
variables left out, so each side imports its own code and nothing else), each command timed as a
whole process, and each side's `serve --http`. What is timed, and the table, are perf_ab.py's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import common

ROOT = common.ROOT

# What the installed `hybrid` script does; click derives the completion variable
# (_HYBRID_COMPLETE) from the program's name, which `python -m hybrid.cli` would not give.
HYBRID_SCRIPT = "import sys; sys.argv[0] = 'hybrid'; from hybrid.cli import main; sys.exit(main())"


class RowFailed(Exception):
    """A side cannot run a row; the message says why."""


@dataclass
class Side:
    label: str
    given: str
    checkout: Path
    worktree: Path | None = None  # made by us, removed at the end
    sha: str = "?"
    dirty: bool = False
    home: Path | None = None
    chunks: str | None = None
    model: str | None = None  # as `hybrid status` names the vault's embedder
    agent_cli: bool = False
    completion: str | None = None  # None: works; else why not
    server: subprocess.Popen | None = None
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.worktree is not None:
            return f"`{self.sha}` (`{self.given}`)"
        dirty = " + uncommitted changes" if self.dirty else ""
        where = "this working tree" if self.checkout == ROOT else f"checkout {self.given}"
        return f"`{self.sha}`{dirty} ({where})"


def log(msg: str) -> None:
    print(f"[perf_ab] {msg}", file=sys.stderr, flush=True)


def git(*args: str, cwd: Path = ROOT) -> str:
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"git {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout.strip()


def tail(text: str, n: int = 300) -> str:
    """The last line of a process's output (an error's own line), shortened to ``n`` characters."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return (lines[-1] if len(lines[-1]) <= n else lines[-1][:n - 1] + "…") if lines else "(no output)"


class Checkouts:
    """The two sides' checkouts and how their commands run, in ``work`` (its ``cwd``: an
    empty directory, so nothing in it shadows a side's code)."""

    def __init__(self, args: argparse.Namespace, work: Path):
        self.args = args
        self.work = work
        self.cwd = work / "cwd"  # empty: nothing in it shadows a side's code
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.py = args.python

    # -- the sides ---------------------------------------------------------------------------
    def side(self, label: str, given: str, wt_root: Path) -> Side:
        path = Path(given).expanduser()
        if path.is_dir():
            checkout = path.resolve()
            if not (checkout / "hybrid" / "cli.py").is_file():
                raise SystemExit(f"--{label.lower()} {given}: no hybrid/cli.py in that directory")
            s = Side(label, given, checkout)
        else:
            if subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{given}^{{commit}}"], cwd=ROOT,
                              capture_output=True).returncode:
                raise SystemExit(f"--{label.lower()} {given}: neither a directory nor a git revision")
            wt = wt_root / label
            log(f"git worktree add --detach {wt} {given}")
            git("worktree", "add", "--detach", str(wt), given)
            s = Side(label, given, wt, worktree=wt)
        try:
            s.sha = git("rev-parse", "--short", "HEAD", cwd=s.checkout)
            s.dirty = bool(git("status", "--porcelain", cwd=s.checkout))
        except SystemExit:
            s.sha = "not a git checkout"
        return s

    def env(self, side: Side, home: Path | None = None, **extra: str) -> dict:
        env = {k: v for k, v in os.environ.items()  # byte code is written, as an install has it
               if not k.startswith(("HYBRID_", "_HYBRID_")) and k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
        env.update(HYBRID_HOME=str(home or side.home), PYTHONPATH=str(side.checkout), **extra)
        return env

    def cli(self, side: Side, *argv: str) -> list[str]:
        return [self.py, "-m", "hybrid.cli", *argv]

    def capture(self, side: Side, cmd: list[str], timeout: float = 600, **extra: str):
        return subprocess.run(cmd, cwd=self.cwd, env=self.env(side, **extra), capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=timeout)

    def timed(self, side: Side, cmd: list[str], timeout: float = 600, **extra: str) -> float:
        """Wall seconds of the whole process, output discarded; RowFailed unless it exits 0."""
        env = self.env(side, **extra)
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Not wait(timeout=...): that polls with sleeps of up to 50 ms, which would round the times.
        watchdog = threading.Timer(timeout, proc.kill)
        watchdog.start()
        try:
            rc = proc.wait()
            s = time.perf_counter() - t
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if rc and s >= timeout:
            raise RowFailed(f"killed after {timeout:.0f} s")
        if rc:
            again = self.capture(side, cmd, timeout, **extra)  # once more, to say why
            raise RowFailed(f"exit {rc}: {tail(again.stderr or again.stdout)}")
        return s

    def check_import(self, side: Side) -> None:
        # each side's modules byte-compiled first (scripts/bootstrap.sh does the same for an
        # editable install): otherwise a side whose files are newer than their byte code pays
        # for compiling them in every timed run
        subprocess.run([self.py, "-m", "compileall", "-q", str(side.checkout / "hybrid")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = self.capture(side, [self.py, "-c", "import hybrid; print(hybrid.__file__)"],
                         home=self.work / "no-home")
        where = Path(r.stdout.strip() or "?").resolve()
        if r.returncode or not where.is_relative_to(side.checkout):
            raise SystemExit(f"side {side.label}: `import hybrid` gives {where} (exit {r.returncode}), "
                             f"not code inside {side.checkout}: {tail(r.stderr)}")
        log(f"side {side.label}: {side.describe()}, hybrid from {where}")

    # -- the server --------------------------------------------------------------------------
    def start_server(self, side: Side) -> None:
        port = common.free_port()
        logf = open(self.work / f"server-{side.label}.log", "wb")
        side.server = subprocess.Popen(self.cli(side, "serve", "--http", "--port", str(port)),
                                       cwd=self.cwd, env=self.env(side), stdin=subprocess.DEVNULL,
                                       stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        logf.close()
        log(f"side {side.label}: serve --http on port {port} (pid {side.server.pid})")
        deadline = time.monotonic() + self.args.server_timeout
        while True:
            if side.server.poll() is not None:
                raise RowFailed(f"server exited {side.server.returncode}: "
                                f"{tail((self.work / f'server-{side.label}.log').read_text(errors='replace'))}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RowFailed(f"/health did not answer 200 within {self.args.server_timeout:.0f} s")
            time.sleep(0.2)
        r = self.capture(side, self.cli(side, "query", self.args.query))
        if r.returncode:
            raise RowFailed(f"warm-up `hybrid query` through the server exited {r.returncode}: {tail(r.stderr)}")
        st = self.capture(side, self.cli(side, "status")).stdout
        if "server running" not in st:
            side.notes.append("`hybrid status` does not say a server is running: its `query` may have "
                              "searched in-process")

    def stop_server(self, side: Side) -> None:
        proc, side.server = side.server, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log(f"side {side.label}: server stopped (pid {proc.pid})")
