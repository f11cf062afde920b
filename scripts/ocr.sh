#!/usr/bin/env bash
# Install Tesseract, the OCR engine that reads text in images and scanned PDF pages
# (hybrid/sources/ocr.py), with English, German, French and Spanish language data, from
# Debian's packages. Idempotent; needs root or sudo and apt (macOS: `brew install tesseract
# tesseract-lang`). More languages: `sudo apt install tesseract-ocr-ita` (… -nld, -por, -rus).
# HYBRID_OCR_LANGS lists the packages' language codes instead ("eng deu").
set -euo pipefail
cd "$(dirname "$0")/.."
langs=${HYBRID_OCR_LANGS:-"eng deu fra spa"}
want=()
for l in $langs; do
    [ -f "/usr/share/tesseract-ocr/5/tessdata/$l.traineddata" ] || want+=("tesseract-ocr-$l")
done
if command -v tesseract >/dev/null && [ "${#want[@]}" -eq 0 ]; then
    exit 0
fi
bash scripts/apt-install.sh scripts/ocr.sh tesseract-ocr "${want[@]}"
command -v tesseract >/dev/null || { echo "scripts/ocr.sh: tesseract did not install" >&2; exit 1; }
