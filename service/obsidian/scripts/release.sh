#!/usr/bin/env bash
# The release zip: dist/hybrid-obsidian-<version>.zip holding hybrid/main.js, manifest.json and
# styles.css (unzip into <vault>/.obsidian/plugins/). Installs with `npm ci` when node_modules
# is missing; the version is manifest.json's and must equal package.json's.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(node -p 'require("./manifest.json").version')
pkg=$(node -p 'require("./package.json").version')
if [ "$version" != "$pkg" ]; then
    echo "manifest.json says $version, package.json $pkg: make them equal" >&2
    exit 1
fi
[ -d node_modules ] || npm ci --no-audit --no-fund
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/hybrid" dist
node esbuild.config.mjs "$stage/hybrid"
cp manifest.json styles.css "$stage/hybrid/"
out="$PWD/dist/hybrid-obsidian-$version.zip"
rm -f "$out"
(cd "$stage" && python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for f in ("main.js", "manifest.json", "styles.css"):
        z.write("hybrid/" + f)' "$out")
echo "$out"
