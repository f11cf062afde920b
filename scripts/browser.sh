#!/usr/bin/env bash
# Install the browser the search page's tests drive: Debian's Chromium (the tests use
# /usr/bin/chromium through Playwright; Playwright's own browser download needs the internet).
# Idempotent; needs root or sudo and apt. HYBRID_CHROMIUM names another binary instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${HYBRID_CHROMIUM:-/usr/bin/chromium}
if [ -x "$bin" ]; then
    exit 0
fi
bash scripts/apt-install.sh scripts/browser.sh chromium
[ -x "$bin" ] || { echo "scripts/browser.sh: chromium did not install at $bin" >&2; exit 1; }
