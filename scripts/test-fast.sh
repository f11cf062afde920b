#!/usr/bin/env bash
# The fast tier: every test not marked slow (no model loads, no servers, no benchmarks), on two
# pytest workers where there are two cores. Runs from the Quickstart's environment: it installs
# hybrid into .venv as scripts/demo.sh does (if not yet) and the fast tier's tools (the [test]
# extra: pytest, pytest-xdist, fpdf2, the PostgreSQL driver), never torch. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
if ! .venv/bin/python -c 'import pytest, xdist, fpdf, psycopg, pgvector' 2>/dev/null; then
    echo "installing the fast tier's test tools into .venv..." >&2
    .venv/bin/pip install -q -e '.[eval,test]' >&2
fi
cores=$(nproc 2>/dev/null || echo 1)
workers="${HYBRID_TEST_WORKERS:-$(( cores >= 2 ? 2 : 0 ))}"
exec .venv/bin/python -m pytest -m "not slow" -n "$workers" -q "$@"
