#!/usr/bin/env bash
# Redraw docs/obsidian-modal.png from the plugin's own DOM (scripts/screenshot.py) with the
# repo's Python ($HYBRID_PYTHON names another) and Debian's Chromium (scripts/browser.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(cd ../.. && pwd)
[ -d node_modules ] || npm ci --no-audit --no-fund
exec "${HYBRID_PYTHON:-$root/.venv/bin/python}" scripts/screenshot.py
