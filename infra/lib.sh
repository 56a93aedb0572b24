# shellcheck shell=bash
# Shared helpers for the local server scripts (kafka.sh, registry.sh, neo4j.sh).
# Sourced, never run. Everything lives under infra/.work (git-ignored):
#   lib/<server>/   jars copied from Maven Central by infra/maven/<server>/pom.xml
#   data/<server>/  server data
#   logs/<server>.log, run/<server>.pid, conf/<server>/ generated config

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK_DIR="${INFRA_WORK_DIR:-$INFRA_DIR/.work}"
LIB_DIR="$WORK_DIR/lib"
DATA_DIR="$WORK_DIR/data"
LOG_DIR="$WORK_DIR/logs"
RUN_DIR="$WORK_DIR/run"
CONF_DIR="$WORK_DIR/conf"

# Ports (defaults chosen to avoid clashing with servers on their usual ports).
KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
REGISTRY_PORT="${REGISTRY_PORT:-18081}"
# apicurio: Apicurio Registry (Confluent API under /apis/ccompat/v7); node: the small stand-in.
REGISTRY_IMPL="${REGISTRY_IMPL:-apicurio}"
registry_path() { [[ "$REGISTRY_IMPL" == apicurio ]] && printf '/apis/ccompat/v7'; return 0; }
NEO4J_BOLT_PORT="${NEO4J_BOLT_PORT:-17687}"
NEO4J_HTTP_PORT="${NEO4J_HTTP_PORT:-17474}"
INFRA_HOST=127.0.0.1

# How long `start` waits for a server to become ready (seconds).
INFRA_START_TIMEOUT="${INFRA_START_TIMEOUT:-180}"

log() { printf '[infra] %s\n' "$*" >&2; }
die() {
  printf '[infra] ERROR: %s\n' "$*" >&2
  exit 1
}

ensure_dirs() { mkdir -p "$LIB_DIR" "$DATA_DIR" "$LOG_DIR" "$RUN_DIR" "$CONF_DIR"; }

# java_major PATH_TO_JAVA -> prints the feature version (17, 21, 25, ...)
java_major() {
  local v
  v="$("$1" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
  v="${v#1.}"
  printf '%s\n' "${v%%[.+-]*}"
}

# find_java MIN_MAJOR -> sets JAVA to a java binary of at least that version.
# Tries $JAVA_HOME, `java` on PATH, then JDKs under /usr/lib/jvm and /opt.
find_java() {
  local min="$1" cand major
  local -a cands=()
  [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]] && cands+=("$JAVA_HOME/bin/java")
  command -v java >/dev/null 2>&1 && cands+=("$(command -v java)")
  for cand in /usr/lib/jvm/*/bin/java /opt/*/bin/java /opt/java/*/bin/java; do
    [[ -x "$cand" ]] && cands+=("$cand")
  done
  for cand in "${cands[@]}"; do
    major="$(java_major "$cand" 2>/dev/null || true)"
    if [[ "$major" =~ ^[0-9]+$ ]] && ((major >= min)); then
      JAVA="$cand"
      return 0
    fi
  done
  if ((${#cands[@]} == 0)); then
    die "java not found. Install a JDK ${min}+ (e.g. 'apt-get install openjdk-17-jre-headless') or set JAVA_HOME."
  fi
  die "java ${min}+ is required, found only: ${cands[*]}. Install a newer JDK or set JAVA_HOME."
}

require_mvn() {
  command -v mvn >/dev/null 2>&1 ||
    die "mvn (Apache Maven 3.6+) not found; it is needed once to fetch the server jars from Maven Central. Install it (e.g. 'apt-get install maven')."
}

# maven_install NAME -> runs infra/maven/NAME/pom.xml (copies jars to $LIB_DIR/NAME)
# unless $LIB_DIR/NAME/.installed exists and is newer than the pom.
maven_install() {
  local name="$1" pom="$INFRA_DIR/maven/$1/pom.xml" dest="$LIB_DIR/$1"
  local stamp="$dest/.installed"
  if [[ -f "$stamp" && "$stamp" -nt "$pom" ]]; then
    return 0
  fi
  if [[ -f "$stamp" ]] && running_pid "$name" >/dev/null; then
    log "$name: $pom changed; not reinstalling while running (stop it first)"
    return 0
  fi
  require_mvn
  find_java 17
  ensure_dirs
  log "$name: resolving jars from Maven Central (first time only) ..."
  rm -rf "$dest"
  local t0=$SECONDS mlog="$LOG_DIR/maven-$name.log"
  if ! JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$JAVA")")")" \
    mvn -B -f "$pom" -Dlib.dir="$dest" package >"$mlog" 2>&1; then
    tail -n 40 "$mlog" >&2
    die "$name: maven install failed (full log: $mlog)"
  fi
  touch "$stamp"
  log "$name: installed into $dest in $((SECONDS - t0))s"
}

pid_file() { printf '%s/%s.pid\n' "$RUN_DIR" "$1"; }

# running_pid NAME -> prints the pid and succeeds when the server is alive.
running_pid() {
  local pf pid
  pf="$(pid_file "$1")"
  [[ -f "$pf" ]] || return 1
  pid="$(cat "$pf" 2>/dev/null)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  if kill -0 "$pid" 2>/dev/null && grep -qa "infra.server=$1" "/proc/$pid/cmdline" 2>/dev/null; then
    printf '%s\n' "$pid"
    return 0
  fi
  return 1
}

# port_open PORT -> succeeds when something accepts TCP connections on 127.0.0.1:PORT
port_open() { (exec 3<>"/dev/tcp/$INFRA_HOST/$1") 2>/dev/null; }

# require_free_ports NAME PORT... -> dies when another process already listens on a port.
require_free_ports() {
  local name="$1" p
  shift
  for p in "$@"; do
    port_open "$p" && die "$name: port $p on $INFRA_HOST is already in use by another process (set another port, see infra/lib.sh)"
  done
  return 0
}

# launch NAME CMD... -> starts CMD detached, stdout/stderr to logs/NAME.log, pid to run/NAME.pid.
# CMD must contain -Dinfra.server=NAME so that the pid can be recognised.
launch() {
  local name="$1" logf="$LOG_DIR/$1.log"
  shift
  [[ -f "$logf" ]] && mv -f "$logf" "$logf.1"
  setsid nohup "$@" >"$logf" 2>&1 </dev/null &
  echo $! >"$(pid_file "$name")"
}

# fail_start NAME MESSAGE -> prints the log tail, stops the process, exits 1
fail_start() {
  local name="$1" msg="$2" logf="$LOG_DIR/$1.log"
  local -a files=("$logf")
  # A server may name more log files to show (e.g. neo4j's own debug.log).
  if declare -F "${name}_extra_logs" >/dev/null; then
    # shellcheck disable=SC2207
    files+=($("${name}_extra_logs"))
  fi
  printf '[infra] ERROR: %s: %s\n' "$name" "$msg" >&2
  for f in "${files[@]}"; do
    [[ -s "$f" ]] || continue
    printf '[infra] ---- last lines of %s ----\n' "$f" >&2
    tail -n 40 "$f" >&2 || true
  done
  stop_server "$name" >/dev/null 2>&1 || true
  exit 1
}

# wait_ready NAME CHECK_FN... -> polls CHECK_FN (a command) until it succeeds, the process dies,
# or INFRA_START_TIMEOUT passes.
wait_ready() {
  local name="$1"
  shift
  local deadline=$((SECONDS + INFRA_START_TIMEOUT))
  while ((SECONDS < deadline)); do
    running_pid "$name" >/dev/null || fail_start "$name" "process exited during start"
    if "$@"; then
      return 0
    fi
    sleep 0.5
  done
  fail_start "$name" "not ready after ${INFRA_START_TIMEOUT}s"
}

# stop_server NAME -> SIGTERM, wait up to 30s, then SIGKILL.
stop_server() {
  local name="$1" pid i
  if ! pid="$(running_pid "$name")"; then
    rm -f "$(pid_file "$name")"
    log "$name: not running"
    return 0
  fi
  log "$name: stopping (pid $pid) ..."
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 60; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name: still alive after 30s, killing"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$(pid_file "$name")"
  log "$name: stopped"
}

# status_line NAME DETAIL -> prints one line, succeeds when running.
status_server() {
  local name="$1" detail="$2" pid rss
  if pid="$(running_pid "$name")"; then
    rss="$(ps -o rss= -p "$pid" 2>/dev/null | tr -d ' ')"
    printf '%-9s running  pid=%s rss=%sMiB %s\n' "$name" "$pid" "$((${rss:-0} / 1024))" "$detail"
    return 0
  fi
  printf '%-9s stopped\n' "$name"
  return 1
}

# dispatch NAME "$@" -> common start|stop|restart|status|install|logs front end.
# The caller defines <name>_install, <name>_start (launch + wait), <name>_ready, <name>_detail.
dispatch() {
  local name="$1" cmd="${2:-status}"
  case "$cmd" in
  install) "${name}_install" ;;
  start)
    ensure_dirs
    if running_pid "$name" >/dev/null; then
      # Already running (maybe still starting): just make sure it is ready.
      wait_ready "$name" "${name}_ready"
      log "$name: already running"
      return 0
    fi
    "${name}_install"
    local t0=$SECONDS
    "${name}_start"
    wait_ready "$name" "${name}_ready"
    log "$name: ready in $((SECONDS - t0))s ($("${name}_detail"))"
    ;;
  stop) stop_server "$name" ;;
  restart)
    stop_server "$name"
    dispatch "$name" start
    ;;
  status) status_server "$name" "$("${name}_detail")" ;;
  logs)
    tail -n "${3:-100}" "$LOG_DIR/$name.log"
    if declare -F "${name}_extra_logs" >/dev/null; then
      local f
      for f in $("${name}_extra_logs"); do
        [[ -f "$f" ]] && printf -- '---- %s ----\n' "$f" && tail -n "${3:-100}" "$f"
      done
    fi
    ;;
  *) die "usage: $0 install|start|stop|restart|status|logs" ;;
  esac
}
