#!/usr/bin/env bash
# Installs (first time only, from Maven Central) and starts the local servers on 127.0.0.1:
# Kafka (KRaft), the schema registry, Neo4j. Waits until each is ready; a second run while
# they are up is a no-op. Then: eval "$(bash infra/env.sh)". A server of this checkout left
# running without a valid pid file is reported (INFRA_STOP_LEFTOVERS=1 stops it).
#   bash infra/up.sh [kafka] [registry] [neo4j]     (default: all three)
set -euo pipefail
# shellcheck source=infra/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

servers=("$@")
((${#servers[@]})) || servers=(kafka registry neo4j)
t0=$SECONDS
ensure_dirs

# Installs one after the other (they share ~/.m2), then start all at once.
for s in "${servers[@]}"; do
  [[ -x "$INFRA_DIR/$s.sh" ]] || die "unknown server '$s' (kafka, registry, neo4j)"
  bash "$INFRA_DIR/$s.sh" install
done

# A server of this checkout left running without its pid file holds its ports and data: report
# it here, in the foreground, so that a terminal can be asked whether to stop it.
for s in "${servers[@]}"; do
  check_leftovers "$s"
done

declare -A pids=()
for s in "${servers[@]}"; do
  bash "$INFRA_DIR/$s.sh" start &
  pids[$s]=$!
done
failed=()
for s in "${servers[@]}"; do
  wait "${pids[$s]}" || failed+=("$s")
done
if ((${#failed[@]})); then
  die "failed to start: ${failed[*]} (logs in $LOG_DIR)"
fi
log "all up in $((SECONDS - t0))s; now run: eval \"\$(bash infra/env.sh)\""
