"""One small stopwatch for the seconds each named stage of a pipeline takes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Stopwatch:
    """Accumulates wall-clock seconds per stage name (a stage timed twice adds up)::

        clock = Stopwatch()
        with clock("discover"):
            ...
        clock.seconds  # {"discover": 0.0123}
    """

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - t)

    def add(self, stage: str, seconds: float) -> None:
        """Count ``seconds`` (measured elsewhere, e.g. on a worker thread) towards ``stage``."""
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def elapsed(self) -> float:
        """Seconds since the stopwatch was made."""
        return time.perf_counter() - self.started

    def rounded(self, digits: int = 4) -> dict[str, float]:
        return {k: round(v, digits) for k, v in self.seconds.items()}
