"""Keep registered vaults in sync with their folders: a filesystem watcher over the incremental
indexer. An event only says *when* to sync, never *what*: ``Hybrid.index([vault])`` works that
out itself (a stat walk), so a dropped or misread event costs at most a late sync, and the
periodic rescan bounds the delay. Nothing here writes to stdout (this runs inside an MCP stdio
server, where stdout is the protocol); everything goes to the "hybrid" logger.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from hybrid.sources.walk import glob_to_regex

if TYPE_CHECKING:
    from hybrid.app.api import Hybrid
    from hybrid.indexing.report import IndexReport

log = logging.getLogger("hybrid")

MAX_BACKOFF = 5.0   # longest pause between retries of a vault whose index run keeps failing
CHECK_EVERY = 1.0   # how often the monitor looks for vanished folders and dead watches
# Our own indexer opens and reads every changed note: reacting to reads would loop forever.
READ_EVENTS = {"opened", "closed_no_write"}


class _Handler(FileSystemEventHandler):
    """Turns one vault's watchdog events into "sync this vault soon"."""

    def __init__(self, watcher: VaultWatcher, name: str, root: str, include: Sequence[str]):
        self.watcher, self.name, self.root = watcher, name, root
        self.include = [glob_to_regex(p) for p in include]

    def _rel(self, path: str | bytes) -> str | None:
        """Vault-relative '/'-path, or None when hidden (any component starts with '.')."""
        rel = os.path.relpath(os.fsdecode(path), self.root).replace(os.sep, "/")
        if rel == ".":
            return rel  # the vault folder itself (deleted, say)
        return None if any(part.startswith(".") for part in rel.split("/")) else rel

    def relevant(self, event: FileSystemEvent) -> bool:
        if event.event_type in READ_EVENTS:
            return False
        rels = [self._rel(p) for p in (event.src_path, event.dest_path) if p]
        if event.is_directory:
            # A folder created, deleted or moved can bring or take notes wholesale; a folder
            # "modified" only echoes a file event that is judged on its own.
            return event.event_type in ("created", "deleted", "moved") and any(rels)
        # Editors that save via a temp file + rename show up as a move onto the note: the
        # destination counts even when the source (".note.md.tmp", "note.md~") does not.
        return any(r and any(g.match(r) for g in self.include) for r in rels)

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            if self.relevant(event):
                self.watcher.schedule(self.name, self.watcher.debounce)
        except Exception as exc:  # an exception here would kill watchdog's dispatch thread
            log.warning("watch %s: cannot handle %s: %s", self.name, event, exc)


class VaultWatcher:
    """Watch the named vaults (default: all registered) and re-index each one ``debounce``
    seconds after its folder stops changing, plus every ``rescan`` seconds regardless (0: never).

    ``on_indexed(report)`` is called from the worker thread after each successful run.
    Use ``start()``/``stop()`` or ``with VaultWatcher(h) as w: ...``.
    """

    def __init__(self, h: Hybrid, vaults: list[str] | None = None, debounce: float = 0.5,
                 rescan: float = 60.0, on_indexed: Callable[[IndexReport], None] | None = None):
        self.h = h
        # None means every registered vault, possibly none yet (a server started on a fresh
        # install must not fail); an unknown name raises VaultError.
        chosen = h.config.select(vaults) if vaults else h.vaults
        self.vaults = {v.name: v for v in chosen}
        self._follow_registry = not vaults  # "all vaults" includes ones registered later
        self.debounce, self.on_indexed = debounce, on_indexed
        self.rescan = rescan if rescan > 0 else float("inf")  # 0 turns the rescan off
        # A folder that never falls quiet is still synced this long after its first event.
        self.max_wait = max(MAX_BACKOFF, 10 * debounce)
        self._cond = threading.Condition()  # guards everything below that the threads share
        self._due: dict[str, float] = {}    # vault -> monotonic time its next run may start
        self._first: dict[str, float] = {}  # vault -> when its oldest unsynced event came
        self._running: str | None = None
        self._failures: dict[str, int] = {}
        self._next_rescan: dict[str, float] = {}
        self._watches: dict[str, tuple[object, tuple[int, int]]] = {}  # watch, folder (dev, ino)
        self._watch_errors: dict[str, str] = {}
        self._state: dict[str, dict[str, Any]] = {
            n: {"watching": False, "last_indexed": None, "last_error": None, "runs": 0}
                       for n in self.vaults}
        self._stopping = threading.Event()
        self._observer: Any = None  # a watchdog Observer once started
        self._threads: list[threading.Thread] = []
        self._stopped = False

    # --- public ---------------------------------------------------------------------------
    def start(self) -> VaultWatcher:
        """Start watching, and schedule one sync per vault right away (to pick up changes made
        while nothing was watching). A watcher starts once."""
        with self._cond:
            if self._observer is not None:
                raise RuntimeError("this VaultWatcher was already started")
            self._observer = Observer()
        self._observer.name = "hybrid-watch-observer"
        self._observer.daemon = True
        self._observer.start()
        for name in self.vaults:
            self._check_watch(name)
            self.schedule(name, 0)
        self._threads = [threading.Thread(target=fn, name=f"hybrid-watch-{role}", daemon=True)
                         for role, fn in (("worker", self._work), ("monitor", self._monitor))]
        for t in self._threads:
            t.start()
        self._announce()
        return self

    def _announce(self) -> None:
        """Leave a note in the data dir that this process watches these vaults, for `hybrid
        status` (removed by :meth:`stop`; a process that dies leaves one whose pid is gone)."""
        folder = self.h.config.data / "watchers"
        self._note = folder / f"{os.getpid()}-{id(self):x}.json"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._note.write_text(json.dumps({"pid": os.getpid(), "vaults": list(self.vaults),
                                              "started": time.time()}), encoding="utf-8")
        except OSError as exc:  # status just will not know; watching goes on
            log.debug("cannot write %s: %s", self._note, exc)

    def stop(self) -> None:
        """Stop watching and join every thread; an index run in progress is let finish.
        Safe to call more than once."""
        with self._cond:
            if self._observer is None or self._stopped:
                return
            self._stopped = True
            self._stopping.set()
            self._cond.notify_all()
        me = threading.current_thread()
        worker, monitor = self._threads
        # The monitor first, so it cannot schedule a watch on an observer that is stopping.
        if monitor is not me:
            monitor.join()
        self._observer.stop()  # unschedules and joins the per-folder emitter threads too
        self._observer.join()
        if worker is not me:  # stop() called from on_indexed runs on the worker itself
            worker.join()
        with self._cond:
            for st in self._state.values():
                st["watching"] = False
        note = getattr(self, "_note", None)
        if note is not None:
            note.unlink(missing_ok=True)

    def state(self) -> dict[str, dict]:
        """Per vault: ``watching`` (a live watch on its folder), ``last_indexed`` (epoch of the
        last successful run), ``last_error``, ``pending`` (a run is scheduled or in progress)
        and ``runs`` (index runs attempted, failed ones included)."""
        with self._cond:
            return {n: dict(s, pending=n in self._due or self._running == n)
                    for n, s in self._state.items()}

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no run is scheduled or in progress; False if ``timeout`` passed first.
        Events the OS has not delivered yet are not known here."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._due and self._running is None, timeout)

    __enter__ = start

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- scheduling -----------------------------------------------------------------------
    def schedule(self, name: str, delay: float) -> None:
        with self._cond:
            if name not in self.vaults:
                return  # an event in flight for a vault forgotten meanwhile
            now = time.monotonic()
            first = self._first.setdefault(name, now)
            # Each event pushes the run back, so a burst (a git checkout) becomes one run.
            self._due[name] = min(now + delay, first + self.max_wait)
            self._cond.notify_all()

    def _work(self) -> None:
        """The single worker: runs never overlap, so one vault is never indexed twice at once."""
        while True:
            with self._cond:
                while True:
                    if self._stopping.is_set():
                        return
                    now = time.monotonic()
                    name = min(self._due, key=self._due.__getitem__, default=None)
                    if name is not None and self._due[name] <= now:
                        break
                    self._cond.wait(None if name is None else self._due[name] - now)
                del self._due[name]
                self._first.pop(name, None)
                self._running = name
            try:
                self._run(name)
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

    def _run(self, name: str) -> None:
        report, error = None, None
        try:
            report = self.h.index([name])[0]
        except Exception as exc:  # VaultError (folder gone), IndexLocked (another writer), ...
            error = str(exc) or type(exc).__name__
        with self._cond:
            if name not in self._state:
                return  # unregistered while it ran
            st = self._state[name]
            repeated = error is not None and st["last_error"] == error
            st["runs"] += 1
            st["last_error"] = error
            if report is not None:
                st["last_indexed"] = time.time()
            self._next_rescan[name] = time.monotonic() + self.rescan
        if error is not None:
            n = self._failures[name] = self._failures.get(name, 0) + 1
            delay = min(max(self.debounce, 0.25) * 2 ** (n - 1), MAX_BACKOFF)
            # One warning per distinct error: a vault that stays broken does not flood the log.
            (log.info if repeated else log.warning)(
                "watch %s: index failed (%s); retrying in %.1fs", name, error, delay)
            self.schedule(name, delay)
            return
        self._failures.pop(name, None)
        assert report is not None  # no error means a report
        log.info("watch %s: indexed, %d added, %d updated, %d removed in %.2fs",
                 name, report.added, report.updated, report.removed, report.seconds)
        if self.on_indexed:
            try:
                self.on_indexed(report)
            except Exception as exc:
                log.warning("watch %s: on_indexed callback failed: %s", name, exc)

    # --- watches --------------------------------------------------------------------------
    def _monitor(self) -> None:
        """Every second: re-establish lost watches and start rescans that are due."""
        while not self._stopping.wait(min(CHECK_EVERY, self.rescan)):
            if self._follow_registry:
                try:
                    self._follow()
                except Exception as exc:
                    log.warning("watch: cannot re-read the vault registry: %s", exc)
            for name in list(self.vaults):
                try:
                    self._check_watch(name)
                except Exception as exc:
                    log.warning("watch %s: cannot check its folder: %s", name, exc)
                with self._cond:
                    due = time.monotonic() >= self._next_rescan.get(name, float("inf"))
                    if due:
                        self._next_rescan[name] = time.monotonic() + self.rescan
                if due:  # catches whatever the OS dropped (inotify queue overflow, say)
                    self.schedule(name, 0)

    def _follow(self) -> None:
        """Adopt registry changes made since the watcher started: watch vaults registered
        since, forget removed ones, and re-watch a vault pointed at another folder."""
        now = {v.name: v for v in self.h.vaults}  # re-reads the config file when it changed
        for name in [n for n in self.vaults if n not in now]:
            self._forget(name)
            log.info("watch %s: no longer registered; stopped watching", name)
        for name, v in now.items():
            old = self.vaults.get(name)
            if old is not None and old.path == v.path and old.include == v.include:
                continue
            if old is not None:
                self._forget(name)
            with self._cond:
                self.vaults[name] = v
                self._state[name] = {"watching": False, "last_indexed": None, "last_error": None,
                                     "runs": 0}
            self._check_watch(name)
            self.schedule(name, 0)

    def _forget(self, name: str) -> None:
        current = self._watches.pop(name, None)
        if current is not None:
            try:
                self._observer.unschedule(current[0])
            except (KeyError, OSError):
                pass
        with self._cond:
            self.vaults.pop(name, None)
            self._state.pop(name, None)
            self._due.pop(name, None)
            self._first.pop(name, None)
            self._failures.pop(name, None)
            self._next_rescan.pop(name, None)

    def _check_watch(self, name: str) -> None:
        """Watch the vault folder if it exists; drop a watch that died or that watches a folder
        no longer at that path (deleted and recreated, or moved away: inotify follows the inode)."""
        root = str(self.vaults[name].path)
        try:
            st = os.stat(root)
            ident = (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
        except OSError:
            ident = None
        current = self._watches.get(name)
        if current is not None:
            watch, watched = current
            alive = any(e.watch == watch and e.is_alive() for e in list(self._observer.emitters))
            if alive and watched == ident:
                return
            del self._watches[name]
            try:
                self._observer.unschedule(watch)
            except (KeyError, OSError):
                pass  # already torn down along with its folder
            with self._cond:
                self._state[name]["watching"] = False
            log.info("watch %s: lost the watch on %s; re-watching once the folder is there",
                     name, root)
        if ident is None:
            return  # nothing to watch until the folder comes back
        try:
            handler = _Handler(self, name, root, self.vaults[name].include)
            watch = self._observer.schedule(handler, root, recursive=True)
        except OSError as exc:  # vanished meanwhile, or the inotify watch limit: next second
            repeated = self._watch_errors.get(name) == str(exc)
            self._watch_errors[name] = str(exc)
            (log.info if repeated else log.warning)("watch %s: cannot watch %s: %s",
                                                    name, root, exc)
            return
        self._watch_errors.pop(name, None)
        self._watches[name] = (watch, ident)
        with self._cond:
            self._state[name]["watching"] = True
        log.info("watch %s: watching %s", name, root)
        self.schedule(name, self.debounce)  # whatever changed while nobody was watching


def running_watchers(data: Path) -> list[dict[str, Any]]:
    """The watchers alive now, from the notes they leave in ``data/watchers`` (a note whose
    process is gone is skipped): ``[{"pid": …, "vaults": […], "started": …}]``."""
    out = []
    for note in sorted((data / "watchers").glob("*.json")):
        try:
            info = json.loads(note.read_text(encoding="utf-8"))
            alive = pid_alive(int(info["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not alive:
            continue
        out.append(info)
    return out


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists. Not ``os.kill(pid, 0)`` on Windows, where any signal
    but the console events terminates the process."""
    if os.name == "nt":
        import ctypes
        handle = ctypes.windll.kernel32.OpenProcess(0x1000, False, pid)  # type: ignore[attr-defined]
        if not handle:
            return False
        code = ctypes.c_ulong()
        ctypes.windll.kernel32.GetExitCodeProcess(handle, ctypes.byref(code))  # type: ignore[attr-defined]
        ctypes.windll.kernel32.CloseHandle(handle)  # type: ignore[attr-defined]
        return code.value == 259  # STILL_ACTIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
