#!/usr/bin/env bash
# Confluent-compatible schema registry on 127.0.0.1.
#   bash infra/registry.sh install|start|stop|restart|status|logs
# Env: REGISTRY_PORT (18081), REGISTRY_IMPL:
#   node            infra/registry/schema-registry.mjs; API at the root URL;
#                   data in infra/.work/data/registry/registry.json.
#   apicurio (default) Apicurio Registry 2.4.2.Final (Quarkus, Java 17+), assembled from Maven Central by
#                   infra/maven/apicurio/pom.xml into infra/.work/lib/apicurio; in-memory H2 storage
#                   (empty after each start); Confluent API at http://127.0.0.1:PORT/apis/ccompat/v7;
#                   -Xmx384m (REGISTRY_HEAP); global compatibility rule BACKWARD, as Confluent's default.
# Stop the running one before switching REGISTRY_IMPL (both run under the name "registry").
set -euo pipefail
# shellcheck source=infra/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=registry
REGISTRY_HEAP="${REGISTRY_HEAP:-384m}"
case "$REGISTRY_IMPL" in
node | apicurio) ;;
*) die "REGISTRY_IMPL must be node or apicurio (got '$REGISTRY_IMPL')" ;;
esac

apicurio_jar() { printf '%s/apicurio/apicurio-registry-server-0-runner.jar\n' "$LIB_DIR"; }

registry_install() {
  if [[ "$REGISTRY_IMPL" == apicurio ]]; then
    maven_install apicurio
    return 0
  fi
  command -v node >/dev/null 2>&1 || die "node (20+) not found; the schema registry runs on Node."
  [[ -d "$INFRA_DIR/../node_modules/avsc" ]] ||
    log "registry: node_modules/avsc missing (run npm install): AVRO schemas will not be validated"
}

registry_start() {
  require_free_ports registry "$REGISTRY_PORT"
  if [[ "$REGISTRY_IMPL" == apicurio ]]; then
    find_java 17
    [[ -f "$(apicurio_jar)" ]] || die "registry: $(apicurio_jar) missing (REGISTRY_IMPL=apicurio bash infra/registry.sh install)"
    log "registry: starting Apicurio Registry on http://$INFRA_HOST:$REGISTRY_PORT/apis/ccompat/v7"
    # %prod.* keys: Apicurio's application.properties sets them per profile, which beats plain keys.
    launch "$NAME" "$JAVA" "-Xmx$REGISTRY_HEAP" -XX:+UseSerialGC -Dinfra.server=registry "-Dinfra.home=$WORK_DIR" \
      -Dquarkus.http.host="$INFRA_HOST" "-D%prod.quarkus.http.port=$REGISTRY_PORT" \
      "-D%prod.quarkus.datasource.jdbc.url=jdbc:h2:mem:registry_db" \
      "-D%prod.quarkus.datasource.jdbc.initial-size=2" "-D%prod.quarkus.datasource.jdbc.min-size=2" \
      "-D%prod.quarkus.datasource.jdbc.max-size=20" \
      -Dregistry.rules.global.compatibility=BACKWARD \
      -jar "$(apicurio_jar)"
    return 0
  fi
  mkdir -p "$DATA_DIR/registry"
  log "registry: starting on http://$INFRA_HOST:$REGISTRY_PORT"
  launch "$NAME" node "$INFRA_DIR/registry/schema-registry.mjs" --port "$REGISTRY_PORT" \
    --host "$INFRA_HOST" --data "$DATA_DIR/registry" --tag=infra.server=registry "--tag=infra.home=$WORK_DIR"
}


registry_ready() { curl -sf -o /dev/null --max-time 2 "http://$INFRA_HOST:$REGISTRY_PORT$(registry_path)/subjects"; }

registry_detail() {
  printf 'url=http://%s:%s%s' "$INFRA_HOST" "$REGISTRY_PORT" "$(registry_path)"
  [[ "$REGISTRY_IMPL" == apicurio ]] && printf ' (apicurio)'
  return 0
}

dispatch "$NAME" "$@"
