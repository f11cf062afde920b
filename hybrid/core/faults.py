"""Fault injection for the crash tests: each step of an index run that must survive a kill names
a checkpoint; ``HYBRID_FAULT=<name>`` makes the process SIGKILL itself there, exactly as a power
cut or the OOM killer would (tests/system/test_crash.py runs every one)."""

from __future__ import annotations

import os


def checkpoint(name: str) -> None:
    """Kill this process with SIGKILL here when ``HYBRID_FAULT`` is ``name``."""
    if os.environ.get("HYBRID_FAULT") == name:
        import signal
        os.kill(os.getpid(), signal.SIGKILL)
