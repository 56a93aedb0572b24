#!/usr/bin/env bash
# Confluent-compatible schema registry on 127.0.0.1 (infra/registry/schema-registry.mjs, Node).
# Apicurio Registry could not be installed from Maven Central here: see README-infra.md.
#   bash infra/registry.sh install|start|stop|restart|status|logs
# Env: REGISTRY_PORT (18081). Data: infra/.work/data/registry/registry.json.
set -euo pipefail
# shellcheck source=infra/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=registry

registry_install() {
  command -v node >/dev/null 2>&1 || die "node (20+) not found; the schema registry runs on Node."
  [[ -d "$INFRA_DIR/../node_modules/avsc" ]] ||
    log "registry: node_modules/avsc missing (run npm install): AVRO schemas will not be validated"
}

registry_start() {
  require_free_ports registry "$REGISTRY_PORT"
  mkdir -p "$DATA_DIR/registry"
  log "registry: starting on http://$INFRA_HOST:$REGISTRY_PORT"
  launch "$NAME" node "$INFRA_DIR/registry/schema-registry.mjs" --port "$REGISTRY_PORT" \
    --host "$INFRA_HOST" --data "$DATA_DIR/registry" --tag=infra.server=registry
}

registry_ready() { curl -sf -o /dev/null --max-time 2 "http://$INFRA_HOST:$REGISTRY_PORT/subjects"; }

registry_detail() { printf 'url=http://%s:%s' "$INFRA_HOST" "$REGISTRY_PORT"; }

dispatch "$NAME" "$@"
