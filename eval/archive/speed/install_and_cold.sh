#!/usr/bin/env bash
# What a user pays, for one git revision: install time and venv size, cold `hybrid query` (a new
# process, no server: the model loads) and a cold lexical query, and indexing obsidian-help from
# scratch. Timings on the shared 2-core machine are noisy: run two revisions back to back and
# compare medians.
#
#   bash eval/archive/speed/install_and_cold.sh REV [WORKDIR]      e.g. e708851 (before issue #13's ONNX default) or HEAD
#
# Revisions before issue #13 installed torch through sentence-transformers; the script installs
# them as scripts/bootstrap.sh did then (torch==2.13.0 first, then the package). From issue #13 on
# it runs that revision's scripts/bootstrap.sh without --dev (no torch).
set -euo pipefail
rev=${1:?usage: install_and_cold.sh REV [WORKDIR]}
repo=$(cd "$(dirname "$0")/../../.." && pwd)
work=${2:-/tmp/hybrid-bench-$rev}
vaults=${OBSIDIAN_HELP:-$repo/../shared/vaults/obsidian-help}
rm -rf "$work"
git -C "$repo" worktree add -f --detach "$work" "$rev" >/dev/null 2>&1
cd "$work"
start=$(date +%s.%N)
if grep -q -- '--dev' scripts/bootstrap.sh; then
    bash scripts/bootstrap.sh >/dev/null 2>&1
else
    python3 -m venv .venv
    .venv/bin/pip install -q "torch==2.13.0" >/dev/null 2>&1
    .venv/bin/pip install -q . >/dev/null 2>&1
fi
end=$(date +%s.%N)
echo "$rev install_s $(echo "$end - $start" | bc)"
echo "$rev venv_MB $(du -sm .venv | cut -f1)"
echo "$rev torch_installed $(.venv/bin/python -c 'import importlib.util as u; print(u.find_spec("torch") is not None)')"
export HYBRID_HOME="$work/.home"
.venv/bin/hybrid index hybrid/sample_vault --name sample >/dev/null 2>&1
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
for i in 1 2 3 4 5 6 7; do echo "$rev cold_query_s $(t .venv/bin/hybrid query "how did I set up tailscale" --local -n 3)"; done
for i in 1 2 3 4 5; do echo "$rev cold_lexical_query_s $(t .venv/bin/hybrid query '"orders-created"' --mode lexical --local -n 3)"; done
if [ -d "$vaults" ]; then
    echo "$rev index_obsidian_help_s $(t .venv/bin/hybrid index "$vaults" --name oh)"
    .venv/bin/hybrid status --json 2>/dev/null | python3 -c "import json,sys; print('$rev chunks', {v['name']: v['chunks'] for v in json.load(sys.stdin)})"
fi
git -C "$repo" worktree remove --force "$work"
