#!/usr/bin/env bash
# The plugin's tests as CI runs them: a clean install from package-lock.json, the type check,
# then vitest, which starts its own `hybrid serve --http` on 127.0.0.1 with the repo's
# .venv/bin/python (HYBRID_PYTHON names another).
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
npm test
