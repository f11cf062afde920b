#!/usr/bin/env bash
# Install Tesseract, the OCR engine that reads text in images and scanned PDF pages
# (hybrid/sources/ocr.py), with English, German, French and Spanish language data, from
# Debian's packages. Idempotent; needs root or sudo and apt (macOS: `brew install tesseract
# tesseract-lang`). More languages: `sudo apt install tesseract-ocr-ita` (… -nld, -por, -rus).
# HYBRID_OCR_LANGS lists the packages' language codes instead ("eng deu").
set -euo pipefail
langs=${HYBRID_OCR_LANGS:-"eng deu fra spa"}
want=()
for l in $langs; do
    [ -f "/usr/share/tesseract-ocr/5/tessdata/$l.traineddata" ] || want+=("tesseract-ocr-$l")
done
if command -v tesseract >/dev/null && [ "${#want[@]}" -eq 0 ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "scripts/ocr.sh: no apt-get: install Tesseract (and its language data) with your package manager" >&2
    exit 1
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
echo "installing Debian's tesseract-ocr ${want[*]} for OCR (first time: a minute)..." >&2
export DEBIAN_FRONTEND=noninteractive
pkgs=(tesseract-ocr "${want[@]}")
$sudo apt-get install -y -q "${pkgs[@]}" >/dev/null 2>&1 || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "${pkgs[@]}" >/dev/null; }
command -v tesseract >/dev/null || { echo "scripts/ocr.sh: tesseract did not install" >&2; exit 1; }
