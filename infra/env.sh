#!/usr/bin/env bash
# Prints the export lines that point clients and tests at the local servers:
#   eval "$(bash infra/env.sh)"
# Honours the same port variables as the start scripts (KAFKA_PORT, REGISTRY_PORT, ...).
set -euo pipefail
# shellcheck source=infra/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cat <<ENV
export KAFKA_BROKERS=$INFRA_HOST:$KAFKA_PORT
export SCHEMA_REGISTRY_URL=http://$INFRA_HOST:$REGISTRY_PORT$(registry_path)
export NEO4J_URI=bolt://$INFRA_HOST:$NEO4J_BOLT_PORT
export NEO4J_HTTP_URL=http://$INFRA_HOST:$NEO4J_HTTP_PORT
export NEO4J_USER=neo4j
ENV
printf 'export NEO4J_PASSWORD=%q\n' "${NEO4J_PASSWORD:-streaming-memory}"
