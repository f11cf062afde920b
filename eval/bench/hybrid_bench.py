"""`hybrid` CLI with the ``bench`` embedder spec installed (see common.py), for subprocess
measurements: full index, serve, cold queries. With ``HYBRID_BENCH_USAGE=1`` it prints one JSON
line to stderr at exit: wall seconds, CPU seconds (user+sys) and peak RSS of this process.

    HYBRID_HOME=... .venv/bin/python eval/bench/hybrid_bench.py index --json
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import sys
import time
from pathlib import Path

T0 = time.perf_counter()


def _usage() -> None:
    """Peak RSS from VmHWM: ru_maxrss of an exec'd child starts at its parent's high-water mark."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    hwm = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmHWM:"))
    print("BENCH_USAGE " + json.dumps({"wall_s": round(time.perf_counter() - T0, 3),
                                       "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
                                       "peak_rss_mb": round(hwm / 1024, 1)}),
          file=sys.stderr)


if __name__ == "__main__":
    if os.environ.get("HYBRID_BENCH_USAGE"):
        atexit.register(_usage)
    import common
    common.install()
    from hybrid.faces.cli.main import main
    main()
