"""Re-index runs started from the search page, one thread each, with their progress.

A job follows the indexer's ``progress(stage, done, total)`` callback (stages ``scan``,
``load``, ``embed``, ``write``: :data:`hybrid.indexing.report.PROGRESS_STAGES`), so the page can draw
a bar per run. One job per vault at a time; finished jobs are kept (the newest
:data:`KEEP` of them) so the page can show how the last run ended.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import HybridError
from hybrid.indexing.report import Estimate

if TYPE_CHECKING:
    from hybrid.app.api import Hybrid

log = logging.getLogger("hybrid")
KEEP = 20
LOCK_WAIT = 60.0  # seconds a job waits for another indexer (the watcher, a CLI run) to finish


@dataclass
class Job:
    id: int
    vault: str
    state: str = "running"          # running, done, failed
    stage: str = "scan"
    done: int = 0
    total: int | None = None
    estimated: bool = False          # ``total`` is an estimate (embedding while notes are read)
    started: float = field(default_factory=time.time)
    finished: float | None = None
    summary: dict[str, Any] = field(default_factory=dict)  # counts from the IndexReport
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class IndexJobs:
    def __init__(self, h: Hybrid):
        self.h = h
        self._jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def start(self, vault: str) -> Job:
        """Start re-indexing ``vault`` (VaultError for an unknown name); the running job when
        one is already at work on it."""
        self.h.config.vault(vault)
        with self._lock:
            running = next((j for j in self._jobs.values() if j.vault == vault and j.state == "running"), None)
            if running is not None:
                return running
            job = Job(next(self._ids), vault)
            self._jobs[job.id] = job
            for old in sorted(self._jobs)[:-KEEP]:
                if self._jobs[old].state != "running":
                    del self._jobs[old]
        threading.Thread(target=self._run, args=(job,), name=f"hybrid-ui-index-{vault}", daemon=True).start()
        return job

    def _run(self, job: Job) -> None:
        def progress(stage: str, done: int, total: int | None) -> None:
            with self._lock:
                job.stage, job.done, job.total = stage, done, total
                job.estimated = isinstance(total, Estimate)
        try:
            report = self.h.index([job.vault], wait=LOCK_WAIT, progress=progress)[0]
            summary = {k: getattr(report, k) for k in ("added", "updated", "removed", "unchanged",
                                                       "skipped", "chunks", "seconds")}
            summary["warnings"] = len(report.warnings)
            with self._lock:
                job.state, job.summary = "done", summary
        except HybridError as exc:
            with self._lock:
                job.state, job.error = "failed", str(exc).splitlines()[0] if str(exc) else "failed"
        except Exception as exc:  # a bug must still end the job, not leave it "running" forever
            log.exception("re-indexing %s from the search page failed", job.vault)
            with self._lock:
                job.state, job.error = "failed", f"{type(exc).__name__}: {exc}".splitlines()[0]
        finally:
            with self._lock:
                job.finished = time.time()

    def get(self, job_id: int) -> Job | None:
        with self._lock:
            job = self._jobs.get(job_id)
            return None if job is None else Job(**job.to_dict())

    def all(self) -> list[Job]:
        with self._lock:
            return [Job(**j.to_dict()) for j in self._jobs.values()]
