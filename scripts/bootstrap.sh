#!/usr/bin/env bash
# Create .venv (if absent) and install hybrid with its test extras into it. Idempotent: a re-run
# only reinstalls when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "hybrid needs Python >= 3.11")'
    "$PY" -m venv .venv
fi
stamp=.venv/.hybrid-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "installing hybrid into .venv (first time: a few minutes)..." >&2
    # sentence-transformers would otherwise pull the newest torch, a multi-GB CUDA build; the
    # pinned release is the CPU build this project is tested with.
    .venv/bin/python -c 'import torch' 2>/dev/null || .venv/bin/pip install -q "torch==2.13.0" >&2
    .venv/bin/pip install -q -e '.[dev]' >&2
    echo "$want" > "$stamp"
fi
