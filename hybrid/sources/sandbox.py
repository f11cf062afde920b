"""The parent's side of the converter worker (:mod:`hybrid.sources.worker`): one worker
process per memory limit, started on first use and kept for a run, a deadline per document
enforced by a watcher thread, and the worker's death told apart (out of memory, killed at the
deadline, crashed) into one :class:`ConvertError` naming the document and the bound.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from hybrid.sources import worker
from hybrid.sources.worker import MAX_HEADER_BYTES, read_frame, write_frame

if TYPE_CHECKING:
    import logging
    from subprocess import Popen

    from hybrid.core.settings import Settings

# The parent reads no reply larger than this: a document's text is capped well below it.
MAX_REPLY_BYTES = 1 << 30
START_SECONDS = 30.0  # to start a worker: the interpreter, and its limits set
WATCH_SECONDS = 0.1  # how often a deadline is checked while the worker is idle
# how often the converting worker's memory peaks are read: a bomb can reach a 256 MB limit in
# a quarter of a second, and a peak missed reads its death as a crash, not as out of memory
PEAK_SECONDS = 0.01


class ConvertError(ValueError):
    """A document that could not be converted; ``str()`` is the one-line warning naming it,
    ``reason`` why (``kind``: ``memory``, ``timeout``, ``crash``, ``error`` or a caller's)."""

    def __init__(self, path: str, reason: str, kind: str = "error") -> None:
        super().__init__(f"{path}: {reason}; skipped")
        self.path, self.reason, self.kind = path, reason, kind


@dataclass(frozen=True)
class Limits:
    """The bounds of reading one document: the converter worker's address space in MB and
    seconds, and how many characters a reader of ours may expand a file to (a compressed
    drawing's; None: the default ``max_file_bytes``, :func:`expand_limit`); and how text in
    pictures is read (:mod:`hybrid.sources.ocr`): Tesseract's languages (``eng+deu``; "": no
    OCR, ``ocr_off`` says why) and the folder its results are kept in."""
    memory_mb: int
    timeout: float
    max_file_bytes: int | None = None
    ocr: str = ""
    ocr_off: str = ""
    ocr_cache: str | None = None

    @property
    def ocr_key(self) -> str:
        """What an image or scan skipped under these limits was judged by
        (:func:`hybrid.indexing.skipped.bounds_of`): the OCR languages, or that there was none."""
        return f"ocr:{self.ocr}" if self.ocr else "ocr:off"


def convert_limits(settings: Settings | None = None) -> Limits:
    """The bounds of converting one document under ``settings`` (default: the defaults)."""
    if settings is None:
        return _default_limits()
    return Limits(settings.convert_max_memory_mb, settings.convert_timeout, settings.max_file_bytes)


def expand_limit(limits: Limits | None) -> int:
    """The characters a document read in this process may expand to under ``limits``: what a
    file may hold (``max_file_bytes``), so that a compressed part holds no more than it could
    written out."""
    if limits is not None and limits.max_file_bytes is not None:
        return limits.max_file_bytes
    return _default_file_bytes()


@functools.cache
def _default_limits() -> Limits:
    from hybrid.core.settings import Settings
    return convert_limits(Settings())


@functools.cache
def _default_file_bytes() -> int:
    from hybrid.core.settings import Settings
    return Settings().max_file_bytes


def convert(op: str, name: str, limits: Limits, payload: bytes = b"", **fields: Any) -> dict:
    """Run ``op`` (``pdf`` or ``html``) on one document in the worker for ``limits`` and
    return its reply (``{"ok": True, …}``, or ``{"ok": False, "kind": …}`` for a document the
    op itself refused). ``name`` is the document's vault-relative path or URL, for warnings.
    Raises ConvertError when the worker ran out of memory or time, crashed, or failed."""
    return _worker(limits.memory_mb).call({"op": op, "name": name, **fields}, payload, limits, name)


def shutdown(wait: float | None = 5.0) -> None:
    """Stop every worker this process started (waiting up to ``wait`` seconds for a document
    another thread is converting; then it is killed). The next conversion starts one again."""
    with _registry_lock:
        workers = list(_workers.values())
    for w in workers:
        w.stop(wait)


def running_pids() -> list[int]:
    """Process ids of the workers running now (for tests and diagnostics)."""
    with _registry_lock:
        return [w.proc.pid for w in _workers.values() if w.proc is not None and w.proc.poll() is None]


_registry_lock = threading.Lock()
_workers: dict[int, _Worker] = {}
_atexit_registered = False


def _worker(memory_mb: int) -> _Worker:
    global _atexit_registered
    with _registry_lock:
        if not _atexit_registered:
            import atexit
            atexit.register(shutdown, 1.0)
            _atexit_registered = True
        if memory_mb not in _workers:
            _workers[memory_mb] = _Worker(memory_mb)
        return _workers[memory_mb]


class _Died(Exception):
    def __init__(self, before_request: bool) -> None:
        self.before_request = before_request


class _Worker:
    """One child process for one memory limit, started on first use and after each death."""

    def __init__(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        self.lock = threading.Lock()
        self.proc: Popen[bytes] | None = None
        self.due: float | None = None  # when the document being converted runs out of time
        self.expired = False
        # The worker's own peak memory (bytes: resident, address space) while it converts,
        # read from /proc by the watcher. Not wait4's ru_maxrss: on Linux a child spawned by a
        # parent holding a model inherits the parent's peak through fork, and would look out
        # of memory whenever it crashed.
        self.seen = (0, 0)

    def call(self, header: dict, payload: bytes, limits: Limits, name: str) -> dict:
        header = {**header, "cpu": int(limits.timeout) + 5}
        with self.lock:
            for attempt in (1, 2):
                try:
                    return self._exchange(header, payload, limits, name)
                except _Died as died:
                    # an idle worker killed from outside (the OOM killer, a user): one new start
                    if not (died.before_request and attempt == 1):
                        raise ConvertError(name, "the converter could not be started (is "
                                                 f"convert_max_memory_mb, {self.memory_mb:,}, "
                                                 "too low?)", "crash") from None
        raise AssertionError("unreachable")

    def _exchange(self, header: dict, payload: bytes, limits: Limits, name: str) -> dict:
        proc = self._running()
        to_worker, from_worker = _pipes(proc)
        self._arm(limits.timeout)
        try:
            try:
                write_frame(to_worker, json.dumps(header).encode("utf-8"))
                write_frame(to_worker, payload)
                to_worker.flush()
                sent = True
            except OSError:  # BrokenPipeError: it died before it read this document
                sent = False
            data = read_frame(from_worker, MAX_REPLY_BYTES) if sent else None
        finally:
            self.due = None
        if not sent and not self.expired:
            _kill(proc)
            self._reap(proc)
            raise _Died(before_request=True)
        if data is None:  # died (or was killed) while converting; or a reply over the cap
            _kill(proc)  # a dead process keeps the status it died with
            code, reaped = self._reap(proc)
            seen = self.seen if _PROC else (reaped or 0, 0)
            _log().debug("converter died on %s: %s, peak RSS %s MB, address space %s MB", name,
                         _exit_name(code), f"{seen[0] / 2**20:,.0f}", f"{seen[1] / 2**20:,.0f}")
            if self.expired:
                raise ConvertError(name, f"converting it took longer than {limits.timeout:g} s "
                                         "(convert_timeout)", "timeout")
            if _out_of_memory(code, seen, self.memory_mb):
                raise ConvertError(name, _memory_reason(self.memory_mb), "memory")
            raise ConvertError(name, f"the converter crashed on it ({_exit_name(code)})", "crash")
        try:
            reply = json.loads(data.decode("utf-8", "surrogatepass"))
        except ValueError:
            self._stop_now()
            raise ConvertError(name, "the converter sent a reply that is not JSON") from None
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            self._stop_now()
            raise ConvertError(name, "the converter sent a malformed reply")
        if not reply["ok"] and reply.get("kind") == "memory":
            self._stop_now()  # it exits after a MemoryError: its heap is not worth keeping
            raise ConvertError(name, _memory_reason(self.memory_mb), "memory")
        if not reply["ok"] and reply.get("kind") == "error":
            raise ConvertError(name, f"cannot convert it ({str(reply.get('message'))[:200]})")
        return reply

    def _running(self) -> Popen[bytes]:
        """The live worker, started (and its limits in force) if there is none."""
        import subprocess
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        if self.proc is not None:
            self._reap(self.proc)
        if not sys.executable:
            raise _Died(before_request=False)
        kwargs: dict[str, Any] = {}
        if os.name == "nt":
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NO_WINDOW", 0)
        try:
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(worker.__file__), str(self.memory_mb)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                close_fds=True, **kwargs)
        except OSError:
            raise _Died(before_request=False) from None
        self.proc = proc
        threading.Thread(target=self._watch, args=(proc,), name="hybrid-converter-watch",
                         daemon=True).start()
        self._arm(START_SECONDS)
        try:
            ready = read_frame(_pipes(proc)[1], MAX_HEADER_BYTES)
        finally:
            self.due = None
        if ready is None:
            _kill(proc)
            code, _ = self._reap(proc)
            _log().debug("converter did not start: %s", _exit_name(code))
            raise _Died(before_request=False)
        _log().debug("converter %d started: %s", proc.pid, ready.decode("utf-8", "replace"))
        return proc

    def _arm(self, seconds: float) -> None:
        self.expired = False
        self.seen = (0, 0)
        self.due = time.monotonic() + seconds

    def _watch(self, proc: Popen[bytes]) -> None:
        """Kill ``proc`` when the document it converts is past its deadline; ends with it.
        (One thread polling while a worker lives: a timer thread per document cost ~1 ms of
        GIL hand-offs per round trip, which a small web page would notice.)"""
        while self.proc is proc and proc.returncode is None:
            time.sleep(WATCH_SECONDS if self.due is None else PEAK_SECONDS)
            due = self.due
            if due is not None and _PROC:
                got = _peaks(proc.pid)
                if got is not None:
                    self.seen = (max(self.seen[0], got[0]), max(self.seen[1], got[1]))
            if due is not None and time.monotonic() > due and self.proc is proc:
                self.expired = True
                _kill(proc)

    def _reap(self, proc: Popen[bytes]) -> tuple[int | None, int | None]:
        """(exit code, peak RSS in bytes or None) of a worker that ended or is ending."""
        if proc is self.proc:
            self.proc = None
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        peak = None
        if proc.returncode is None and hasattr(os, "wait4"):
            try:
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                peak = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
            except ChildProcessError:
                pass
        if proc.returncode is None:
            try:
                proc.wait(5)
            except Exception:  # noqa: BLE001 - it is being killed; nothing else to do
                _kill(proc)
        return proc.returncode, peak

    def _stop_now(self) -> None:
        if self.proc is not None:
            proc = self.proc
            _kill(proc)
            self._reap(proc)

    def stop(self, wait: float | None) -> None:
        got = self.lock.acquire(timeout=-1 if wait is None else wait)
        try:
            proc = self.proc
            if proc is None:
                return
            if not got:  # busy: the thread converting sees it die and reaps it
                _kill(proc)
                return
            try:
                _pipes(proc)[0].close()  # end of input: the worker exits by itself
                proc.wait(2)
            except Exception:  # noqa: BLE001 - then it is killed
                _kill(proc)
            self._reap(proc)
        finally:
            if got:
                self.lock.release()


def _pipes(proc: Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    """(to the worker, from the worker)."""
    if proc.stdin is None or proc.stdout is None:
        raise _Died(before_request=False)
    return proc.stdin, proc.stdout


def _log() -> logging.Logger:
    import logging
    return logging.getLogger("hybrid")


def _kill(proc: Popen[bytes]) -> None:
    if proc.returncode is not None:
        return
    try:
        if os.name == "posix":  # not Popen.kill: its poll() would reap a dead worker, and
            os.kill(proc.pid, signal.SIGKILL)  # with it the peak memory wait4 tells
        else:
            proc.kill()
    except OSError:
        pass


def _memory_reason(memory_mb: int) -> str:
    return f"converting it needed more than {memory_mb:,} MB of memory (convert_max_memory_mb)"


def _out_of_memory(code: int | None, seen: tuple[int, int], memory_mb: int) -> bool:
    """Whether a worker that died by a signal ran into its memory limit: PDFium aborts when an
    allocation fails, so the sign is a death by signal after the worker's resident memory
    reached half the limit, or its address space nine tenths of it (``seen``: its peaks in
    bytes, as the watcher saw them). A huge allocation refused at once leaves no such trace:
    that death reads as a crash."""
    if code is None or code >= 0:
        return False
    limit = memory_mb * 2**20
    return seen[0] >= limit // 2 or seen[1] >= limit * 9 // 10


_PROC = os.path.isdir("/proc/self")


def _peaks(pid: int) -> tuple[int, int] | None:
    """(peak resident bytes, peak address space bytes) of process ``pid`` (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    got = {}
    for line in text.splitlines():
        if line.startswith(("VmHWM:", "VmPeak:")):
            key, _, value = line.partition(":")
            parts = value.split()
            if parts and parts[0].isdigit():
                got[key] = int(parts[0]) * 1024
    return got.get("VmHWM", 0), got.get("VmPeak", 0)


def _exit_name(code: int | None) -> str:
    if code is None:
        return "it stopped answering"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
