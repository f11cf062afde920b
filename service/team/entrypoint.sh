#!/bin/sh
# Register the team vault (its index in the database at $HYBRID_DATABASE_URL), then run one role:
#   index   keep the index in step with the folder mounted at $VAULT_DIR (`hybrid watch`; one per vault)
#   serve   answer queries over HTTP and MCP on port 8765 (needs HYBRID_TOKEN, and HYBRID_ALLOWED_HOSTS
#           with the names clients use; as many servers as you like)
# Anything else is run as a hybrid command (e.g. `query "…"`, `status`).
set -eu
: "${HYBRID_DATABASE_URL:?set HYBRID_DATABASE_URL=postgresql://USER:PASSWORD@HOST/DB}"
VAULT_NAME=${VAULT_NAME:-team}
VAULT_DIR=${VAULT_DIR:-/kb}
hybrid vault list | cut -f1 | grep -qx "$VAULT_NAME" \
  || hybrid vault add "$VAULT_DIR" --name "$VAULT_NAME" --store postgresql
case "${1:-serve}" in
  index) hybrid index --vault "$VAULT_NAME" --wait 60 && exec hybrid watch --vault "$VAULT_NAME" ;;
  serve) exec hybrid serve --http --host 0.0.0.0 --port 8765 ;;
  *) exec hybrid "$@" ;;
esac
