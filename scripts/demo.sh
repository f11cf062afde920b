#!/usr/bin/env bash
# Install, index the bundled sample vault, and run a few queries. Uses ./.hybrid-home so it never
# touches your own hybrid config or indexes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export HYBRID_HOME="$PWD/.hybrid-home"
hy() { echo "\$ hybrid $*" >&2; .venv/bin/hybrid "$@"; }
hy index hybrid/sample_vault --name sample
hy query "how did I set up tailscale" -n 3
hy query '"orders-created"' --mode lexical -n 3
hy query "ev charger breaker" --folder home-lab/ -n 2
hy get "home-lab/networking.md:1-12" --vault sample
# the 1:1 note says `private: true`: the owner sees it, an agent (MCP, --as-agent) does not
hy query "staff promotion packet feedback" -n 2
hy query "staff promotion packet feedback" -n 2 --as-agent
hy status
