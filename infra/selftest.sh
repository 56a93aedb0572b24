#!/usr/bin/env bash
# Start/stop self-test of the local servers (issue #20): ROUNDS times `up.sh` (Kafka, the registry
# and Neo4j started in parallel, as always) then `down.sh`, while busy loops keep CPU cores busy.
# Each round checks that every start is recognised (up.sh succeeds; each pid file names the server
# process itself, after its exec, and it is the only process carrying its markers) and that the
# stop leaves no process carrying a marker of the test's work dir and no open port.
# It runs on its own work dir and ports, so the servers of this checkout are not touched; the jars
# are this checkout's (installed first when missing, as up.sh does).
#   bash infra/selftest.sh [--rounds N] [--hogs N] [--budget MINUTES] [--keep]
#   npm run infra:selftest [-- --rounds 3]
# --rounds   start/stop rounds (10)
# --hogs     busy loops during the rounds (1: one core busy)
# --budget   no new round starts after this many minutes (45); the busy loops end then at the latest
# --keep     keep the test's work dir (logs) instead of deleting it when every round passed
# Env: INFRA_SELFTEST_DIR (${TMPDIR:-/tmp}/infra-selftest-<uid>) the test's work dir;
#      INFRA_SELFTEST_PORT_OFFSET (10000) added to this checkout's ports (by default Kafka
#      29092/29093, registry 28081, Neo4j 27687/27474); INFRA_START_TIMEOUT (300 here: the test is
#      about recognising starts, a loaded machine may be slow). Exits 1 when any round failed.
set -euo pipefail
# shellcheck source=infra/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rounds=10 hogs=1 budget_min=45 keep=false
while (($#)); do
  case "$1" in
  --rounds) rounds="${2:?}" && shift ;;
  --hogs) hogs="${2:?}" && shift ;;
  --budget) budget_min="${2:?}" && shift ;;
  --keep) keep=true ;;
  -h | --help)
    sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *) die "selftest: unknown argument '$1' (--rounds N, --hogs N, --budget MINUTES, --keep)" ;;
  esac
  shift
done
[[ "$rounds" =~ ^[1-9][0-9]*$ && "$hogs" =~ ^[0-9]+$ && "$budget_min" =~ ^[1-9][0-9]*$ ]] ||
  die "selftest: --rounds and --budget take a positive integer, --hogs an integer"

say() { printf '[selftest] %s\n' "$*" >&2; }
servers=(kafka registry neo4j)
t_begin=$EPOCHREALTIME

# 1. Jars: install into this checkout's lib dir (a no-op when present), one after the other.
for s in "${servers[@]}"; do
  bash "$INFRA_DIR/$s.sh" install
done

# 2. The test's own work dir and ports; its servers use this checkout's jars.
offset="${INFRA_SELFTEST_PORT_OFFSET:-10000}"
test_dir="$(realpath -m -- "${INFRA_SELFTEST_DIR:-${TMPDIR:-/tmp}/infra-selftest-$(id -u)}")"
[[ "$test_dir" != "$WORK_DIR" ]] || die "selftest: INFRA_SELFTEST_DIR must not be this checkout's work dir ($WORK_DIR)"
export INFRA_LIB_DIR="$LIB_DIR" INFRA_WORK_DIR="$test_dir"
export KAFKA_PORT=$((KAFKA_PORT + offset)) KAFKA_CONTROLLER_PORT=$((KAFKA_CONTROLLER_PORT + offset))
export REGISTRY_PORT=$((REGISTRY_PORT + offset)) INFRA_START_TIMEOUT="${INFRA_START_TIMEOUT:-300}"
export NEO4J_BOLT_PORT=$((NEO4J_BOLT_PORT + offset)) NEO4J_HTTP_PORT=$((NEO4J_HTTP_PORT + offset))
# shellcheck source=infra/lib.sh
source "$INFRA_DIR/lib.sh" # again: WORK_DIR, LOG_DIR, ... now point at the test's dir
all_ports=()
for s in "${servers[@]}"; do
  read -ra p <<<"$(server_ports "$s")"
  all_ports+=("${p[@]}")
done

# A previous run's leftovers in the test's dir are stopped; anything else on its ports is fatal.
bash "$INFRA_DIR/down.sh" --wipe >/dev/null 2>&1 || true
for p in "${all_ports[@]}"; do
  port_open "$p" && die "selftest: port $p is in use (INFRA_SELFTEST_PORT_OFFSET=$offset); pick another offset"
done
ensure_dirs
say "work dir $WORK_DIR, ports ${all_ports[*]}, $rounds round(s), $hogs busy loop(s), budget ${budget_min} min"

# 3. The CPU hog, bounded by the budget even if this script is killed.
budget_s=$((budget_min * 60))
hog_pids=()
cleanup() {
  local rc=$?
  ((${#hog_pids[@]})) && kill "${hog_pids[@]}" 2>/dev/null
  bash "$INFRA_DIR/down.sh" >/dev/null 2>&1 || true
  if ((rc == 0)) && ! $keep; then
    rm -rf "$DATA_DIR" "$LOG_DIR" "$RUN_DIR" "$CONF_DIR"
    rmdir "$WORK_DIR" 2>/dev/null || true
  else
    say "logs kept in $WORK_DIR/logs"
  fi
  return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for ((h = 0; h < hogs; h++)); do
  timeout "$budget_s" bash -c 'while :; do :; done' &
  hog_pids+=("$!")
done

# marked_pids -> every process carrying this work dir's home marker, whatever the server name.
marked_pids() {
  # shellcheck disable=SC2062 # /proc/[0-9]*/cmdline is the list of files, not a pattern
  grep -lsxzF --regexp="-Dinfra.home=$WORK_DIR" --regexp="--tag=infra.home=$WORK_DIR" /proc/[0-9]*/cmdline |
    while IFS=/ read -r _ _ pid _; do alive "$pid" && printf '%s ' "$pid"; done
  return 0
}

# check_up -> one line per problem after a successful up.sh
check_up() {
  local s pid scan args=() p
  for s in "${servers[@]}"; do
    if ! pid="$(running_pid "$s")"; then
      echo "$s: not recognised as running after up.sh"
      continue
    fi
    mapfile -d '' -t args <"/proc/$pid/cmdline" 2>/dev/null || args=()
    [[ "${args[0]:-}" == */java || "${args[0]:-}" == java || "${args[0]:-}" == node ]] ||
      echo "$s: pid $pid from the pid file is not the server itself: ${args[*]:0:3}"
    scan="$(scan_pids "$s" | tr '\n' ' ')"
    [[ "$scan" == "$pid " ]] || echo "$s: processes with its markers [$scan] != pid file $pid"
    for p in $(server_ports "$s"); do
      port_open "$p" || echo "$s: port $p not open"
    done
  done
}

# check_down -> one line per problem after down.sh
check_down() {
  local s p left
  left="$(marked_pids)"
  [[ -z "$left" ]] || echo "processes left running: $left"
  for s in "${servers[@]}"; do
    [[ -e "$(pid_file "$s")" ]] && echo "$s: pid file left"
    for p in $(server_ports "$s"); do
      port_open "$p" && echo "$s: port $p still open"
    done
  done
  return 0
}

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
deadline=$((SECONDS + budget_s))
failures=0 done_rounds=0 ups=() downs=()
declare -A ready_max=()
for ((r = 1; r <= rounds; r++)); do
  if ((SECONDS >= deadline)); then
    say "budget of ${budget_min} min used up after $done_rounds round(s)"
    failures=$((failures + 1))
    break
  fi
  rlog="$LOG_DIR/selftest-round-$r.log"
  problems=()
  t0=$EPOCHREALTIME
  if bash "$INFRA_DIR/up.sh" "${servers[@]}" >"$rlog" 2>&1; then
    mapfile -t problems < <(check_up)
  else
    problems+=("up.sh failed: $(grep -m1 'ERROR' "$rlog" || tail -n1 "$rlog")")
  fi
  t1=$EPOCHREALTIME
  bash "$INFRA_DIR/down.sh" >>"$rlog" 2>&1 || problems+=("down.sh failed")
  t2=$EPOCHREALTIME
  mapfile -t -O "${#problems[@]}" problems < <(check_down)
  ups+=("$(secs "$t0" "$t1")")
  downs+=("$(secs "$t1" "$t2")")
  for s in "${servers[@]}"; do
    n="$(sed -n "s/^\[infra\] $s: ready in \([0-9]*\)s.*/\1/p" "$rlog")"
    [[ -n "$n" ]] && ((n > ${ready_max[$s]:-0})) && ready_max[$s]=$n
  done
  done_rounds=$r
  if ((${#problems[@]})); then
    failures=$((failures + 1))
    say "round $r/$rounds: FAILED (up ${ups[-1]}s, down ${downs[-1]}s; log $rlog)"
    printf '[selftest]   %s\n' "${problems[@]}" >&2
    # Leave nothing behind for the next round.
    for s in "${servers[@]}"; do stop_server "$s" >/dev/null 2>&1 || true; done
    left="$(marked_pids)"
    # shellcheck disable=SC2086 # a list of pids
    [[ -z "$left" ]] || kill -KILL $left 2>/dev/null || true
  else
    say "round $r/$rounds: ok (up ${ups[-1]}s: $(sed -n 's/^\[infra\] \([a-z0-9]*\): ready in \([0-9]*s\).*/\1 \2/p' "$rlog" | paste -sd, - | sed 's/,/, /g'); down ${downs[-1]}s)"
  fi
done

stats() { printf '%s\n' "$@" | awk '{ s += $1; if (NR == 1 || $1 < mn) mn = $1; if ($1 > mx) mx = $1 }
  END { if (NR) printf "min %.1fs / avg %.1fs / max %.1fs", mn, s / NR, mx }'; }
slowest=""
for s in "${servers[@]}"; do slowest+=" $s ${ready_max[$s]:-?}s"; done
say "summary: $done_rounds/$rounds round(s) run, $failures failed, under $hogs busy loop(s) on $(nproc) core(s)"
((${#ups[@]})) && say "  up (3 servers in parallel): $(stats "${ups[@]}"); slowest ready:$slowest"
((${#downs[@]})) && say "  down: $(stats "${downs[@]}")"
say "  total wall time $(secs "$t_begin" "$EPOCHREALTIME")s"
((failures == 0))
