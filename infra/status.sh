#!/usr/bin/env bash
# One line per local server; exits non-zero when any of them is not running.
set -uo pipefail
INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rc=0
for s in kafka registry neo4j; do
  bash "$INFRA_DIR/$s.sh" status || rc=1
done
exit "$rc"
