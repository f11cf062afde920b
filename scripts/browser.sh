#!/usr/bin/env bash
# Install the browser the search page's tests drive: Debian's Chromium (the tests use
# /usr/bin/chromium through Playwright; Playwright's own browser download needs the internet).
# Idempotent; needs root or sudo and apt. HYBRID_CHROMIUM names another binary instead.
set -euo pipefail
bin=${HYBRID_CHROMIUM:-/usr/bin/chromium}
if [ -x "$bin" ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "scripts/browser.sh: no $bin and no apt-get: install Chromium and set HYBRID_CHROMIUM to it" >&2
    exit 1
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
echo "installing Debian's chromium for the browser tests (first time: a minute or two)..." >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q chromium >/dev/null 2>&1 || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q chromium >/dev/null; }
[ -x "$bin" ] || { echo "scripts/browser.sh: chromium did not install at $bin" >&2; exit 1; }
