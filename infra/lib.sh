# shellcheck shell=bash
# Shared helpers for the local server scripts (kafka.sh, registry.sh, neo4j.sh).
# Sourced, never run. Everything lives under infra/.work (git-ignored; INFRA_WORK_DIR moves it):
#   lib/<server>/   jars copied from Maven Central by infra/maven/<server>/pom.xml (INFRA_LIB_DIR)
#   data/<server>/  server data
#   logs/<server>.log, run/<server>.pid, conf/<server>/ generated config
#
# Every server's command line carries two marker arguments: -Dinfra.server=NAME and
# -Dinfra.home=WORK_DIR (--tag=infra.server=NAME / --tag=infra.home=WORK_DIR for the Node
# registry). The pid file is checked against them, and they find a server of this checkout whose
# pid file is missing or wrong, without ever matching another checkout's servers.

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK_DIR="${INFRA_WORK_DIR:-$INFRA_DIR/.work}"
# Absolute and normalised: it is compared with the -Dinfra.home marker of running servers.
WORK_DIR="$(realpath -m -- "$WORK_DIR" 2>/dev/null || printf '%s' "$WORK_DIR")"
LIB_DIR="${INFRA_LIB_DIR:-$WORK_DIR/lib}"
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

# alive PID -> succeeds while the process exists and is not a zombie.
alive() {
  local stat
  kill -0 "$1" 2>/dev/null || return 1
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat="${stat##*) }"
  [[ "${stat:0:1}" != Z ]]
}

# pid_is_server PID NAME [LEGACY_OK] -> succeeds when PID is alive and its command line carries
# -Dinfra.server=NAME and this work dir's -Dinfra.home marker; with LEGACY_OK=true also when it
# has no home marker at all (a server started by an older version of these scripts, named by
# this checkout's pid file). An empty command line is what /proc shows while the process is
# inside execve: it is read again for up to 2 s rather than taken as "not the server".
pid_is_server() {
  local pid="$1" name="$2" legacy_ok="${3:-false}" i a srv=false home=
  local -a args=()
  [[ "$pid" =~ ^[1-9][0-9]*$ ]] || return 1
  for ((i = 0; ; i++)); do
    alive "$pid" || return 1
    { mapfile -d '' -t args <"/proc/$pid/cmdline"; } 2>/dev/null || return 1
    ((${#args[@]})) && break
    ((i < 40)) || return 1
    sleep 0.05
  done
  for a in "${args[@]}"; do
    case "$a" in
    "-Dinfra.server=$name" | "--tag=infra.server=$name") srv=true ;;
    -Dinfra.home=*) home="${a#-Dinfra.home=}" ;;
    --tag=infra.home=*) home="${a#--tag=infra.home=}" ;;
    esac
  done
  $srv || return 1
  [[ "$home" == "$WORK_DIR" ]] && return 0
  [[ -z "$home" && "$legacy_ok" == true ]]
}

# running_pid NAME -> prints the pid from run/NAME.pid and succeeds when that process is alive
# and is the server (see pid_is_server; a server still in its launch wrapper counts).
running_pid() {
  local pf pid=
  pf="$(pid_file "$1")"
  [[ -f "$pf" ]] || return 1
  { read -r pid <"$pf"; } 2>/dev/null || [[ -n "$pid" ]] || return 1
  pid_is_server "$pid" "$1" true || return 1
  printf '%s\n' "$pid"
}

# scan_pids NAME -> prints the pids of every process carrying NAME's server marker and this work
# dir's home marker, pid file or not. (grep gets its patterns as --regexp=..., so that its own
# command line does not match.)
scan_pids() {
  local f pid
  # shellcheck disable=SC2062 # /proc/[0-9]*/cmdline is the list of files, not a pattern
  while IFS= read -r f; do
    pid="${f#/proc/}"
    pid="${pid%/cmdline}"
    pid_is_server "$pid" "$1" && printf '%s\n' "$pid"
  done < <(grep -lsxzF --regexp="-Dinfra.home=$WORK_DIR" --regexp="--tag=infra.home=$WORK_DIR" \
    /proc/[0-9]*/cmdline)
  return 0
}

# leftover_pids NAME -> the processes of this checkout's NAME that its pid file does not name
# (pid file missing, or pointing elsewhere).
leftover_pids() {
  local tracked p
  tracked="$(running_pid "$1")" || tracked=
  for p in $(scan_pids "$1"); do
    [[ "$p" == "$tracked" ]] || printf '%s\n' "$p"
  done
  return 0
}

# server_ports NAME -> the ports the server listens on (for messages and checks).
server_ports() {
  case "$1" in
  kafka) printf '%s %s\n' "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" ;;
  registry) printf '%s\n' "$REGISTRY_PORT" ;;
  neo4j) printf '%s %s\n' "$NEO4J_BOLT_PORT" "$NEO4J_HTTP_PORT" ;;
  esac
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

# check_leftovers NAME -> deals with a server of this checkout left running without a valid pid
# file (e.g. by a start that was killed): it holds the ports and the data folder, so a new start
# would fail. Stops it when INFRA_STOP_LEFTOVERS=1 or when the user says so at a terminal;
# otherwise dies, saying how to stop it.
check_leftovers() {
  local name="$1" p ans="" busy="" left=()
  mapfile -t left < <(leftover_pids "$name")
  ((${#left[@]})) || return 0
  for p in $(server_ports "$name"); do
    port_open "$p" && busy+=" $p"
  done
  log "$name: a $name of this checkout ($WORK_DIR) is still running without a valid pid file:" \
    "pid ${left[*]}${busy:+, holding port(s)$busy}"
  if [[ "${INFRA_STOP_LEFTOVERS:-}" != 1 && -t 0 && -t 2 ]]; then
    read -r -p "[infra] $name: stop it now? [y/N] " ans || ans=
  fi
  if [[ "${INFRA_STOP_LEFTOVERS:-}" == 1 || "$ans" == [yY]* ]]; then
    log "$name: stopping the leftover (pid ${left[*]}) ..."
    stop_pids "$name" "${left[@]}" || die "$name: could not stop pid ${left[*]}"
    log "$name: leftover stopped"
    return 0
  fi
  die "$name: leftover server (pid ${left[*]}) not stopped: run 'bash infra/$name.sh stop' (or 'bash infra/down.sh'), or start again with INFRA_STOP_LEFTOVERS=1"
}

# launch NAME CMD... -> starts CMD detached (own session, SIGHUP ignored), stdout/stderr to
# logs/NAME.log, and returns once run/NAME.pid names the server process.
# CMD must carry -Dinfra.server=NAME and -Dinfra.home=$WORK_DIR (or the --tag= forms).
# The pid is written by a wrapper shell that then execs CMD, so it is the server's own pid
# whether setsid forks or not (it does when the caller leads its process group, as under job
# control), and the wrapper's command line already carries the markers (they are its
# arguments), so the server is recognised from the moment the pid file exists.
launch() {
  local name="$1" logf="$LOG_DIR/$1.log" pf a i srv=false home=false
  shift
  for a in "$@"; do
    case "$a" in
    "-Dinfra.server=$name" | "--tag=infra.server=$name") srv=true ;;
    "-Dinfra.home=$WORK_DIR" | "--tag=infra.home=$WORK_DIR") home=true ;;
    esac
  done
  if ! $srv || ! $home; then
    die "launch $name: the command must carry -Dinfra.server=$name and -Dinfra.home=$WORK_DIR"
  fi
  pf="$(pid_file "$name")"
  rm -f "$pf" "$pf.tmp"
  [[ -f "$logf" ]] && mv -f "$logf" "$logf.1"
  # shellcheck disable=SC2016 # $$, $0 and $@ are the wrapper's own
  setsid bash -c 'trap "" HUP; echo "$$" >"$0.tmp" && mv -f "$0.tmp" "$0" && exec "$@"' "$pf" "$@" \
    >"$logf" 2>&1 </dev/null &
  # Normally a few milliseconds; a busy machine can delay the wrapper's start.
  for ((i = 0; i < 1500; i++)); do
    [[ -s "$pf" ]] && return 0
    sleep 0.02
  done
  fail_start "$name" "the launch wrapper did not write $pf within 30s"
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

# wait_gone SECONDS PID... -> succeeds once none of the processes is alive (zombies count as
# gone), fails after SECONDS.
wait_gone() {
  local secs="$1" p i
  shift
  local any
  for ((i = 0; i < secs * 20; i++)); do
    any=false
    for p in "$@"; do
      alive "$p" && any=true && break
    done
    $any || return 0
    sleep 0.05
  done
  return 1
}

# stop_pids NAME PID... -> SIGTERM, wait up to 30s, then SIGKILL.
stop_pids() {
  local name="$1" p
  shift
  kill -TERM "$@" 2>/dev/null || true
  if ! wait_gone 30 "$@"; then
    log "$name: still alive after 30s, killing"
    kill -KILL "$@" 2>/dev/null || true
    wait_gone 10 "$@" || {
      for p in "$@"; do alive "$p" && log "$name: WARNING: pid $p survived SIGKILL"; done
      return 1
    }
  fi
}

# stop_server NAME -> stops the server named by the pid file and any other process of this
# checkout carrying NAME's markers (pid file missing or wrong), then removes the pid file.
stop_server() {
  local name="$1" tracked p pids=() rc=0
  tracked="$(running_pid "$name")" || tracked=
  [[ -n "$tracked" ]] && pids+=("$tracked")
  for p in $(scan_pids "$name"); do
    [[ "$p" == "$tracked" ]] || pids+=("$p")
  done
  if ((${#pids[@]} == 0)); then
    rm -f "$(pid_file "$name")" "$(pid_file "$name").tmp"
    log "$name: not running"
    return 0
  fi
  if [[ -z "$tracked" ]]; then
    log "$name: stopping pid ${pids[*]} (no valid pid file; found by its -Dinfra.server/-Dinfra.home markers) ..."
  else
    log "$name: stopping (pid ${pids[*]}) ..."
  fi
  stop_pids "$name" "${pids[@]}" || rc=1
  rm -f "$(pid_file "$name")" "$(pid_file "$name").tmp"
  ((rc == 0)) && log "$name: stopped"
  return "$rc"
}

# status_server NAME DETAIL -> prints one line, succeeds when running.
status_server() {
  local name="$1" detail="$2" pid rss left
  left="$(leftover_pids "$name" | tr '\n' ' ')"
  left="${left% }"
  if pid="$(running_pid "$name")"; then
    rss="$(ps -o rss= -p "$pid" 2>/dev/null | tr -d ' ')"
    printf '%-9s running  pid=%s rss=%sMiB %s%s\n' "$name" "$pid" "$((${rss:-0} / 1024))" "$detail" \
      "${left:+ (and leftover pid $left: bash infra/$name.sh stop)}"
    return 0
  fi
  if [[ -n "$left" ]]; then
    printf '%-9s leftover pid=%s without a valid pid file (bash infra/%s.sh stop)\n' "$name" "$left" "$name"
    return 1
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
    check_leftovers "$name"
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
