#!/usr/bin/env bash
# Stops the local servers started by infra/up.sh.
#   bash infra/down.sh [--wipe]    --wipe also deletes their data (infra/.work/data)
set -euo pipefail
# shellcheck source=infra/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

wipe=false
[[ "${1:-}" == --wipe ]] && wipe=true
rc=0
for s in neo4j registry kafka; do
  bash "$INFRA_DIR/$s.sh" stop || rc=1
done
if $wipe; then
  rm -rf "$DATA_DIR" "$CONF_DIR"
  log "wiped $DATA_DIR"
fi
exit "$rc"
