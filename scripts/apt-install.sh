#!/usr/bin/env bash
# Install Debian packages for the project's scripts (scripts/browser.sh, scripts/ocr.sh):
# `bash scripts/apt-install.sh WHY PKG...`. Needs apt-get and root or sudo; updates the package
# lists only when the first try fails. WHY names the caller in its messages.
set -euo pipefail
why=$1
shift
if ! command -v apt-get >/dev/null; then
    echo "$why: no apt-get: install $* with your package manager" >&2
    exit 1
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
echo "$why: installing Debian's $* (first time: a minute or two)..." >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q "$@" >/dev/null 2>&1 || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "$@" >/dev/null; }
