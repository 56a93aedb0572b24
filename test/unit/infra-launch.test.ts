// infra/lib.sh's launch / running_pid / stop_server with a dummy "server" (a bash process whose
// command line carries the -Dinfra.server / -Dinfra.home markers and that blocks on a FIFO), so
// that it runs in seconds without Java. Issue #20: a server that had started was reported dead
// (its pid checked between fork and exec, or the pid of a short-lived `setsid` fork recorded),
// then left running with no pid file. The full check with the real servers is
// `npm run infra:selftest`.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const LIB = fileURLToPath(new URL("../../infra/lib.sh", import.meta.url));
const hasSetsid = spawnSync("bash", ["-c", "command -v setsid"]).status === 0;
const skip = process.platform !== "linux" ? "needs Linux (/proc)" : hasSetsid ? false : "setsid not installed";

// Sourced before each script: lib.sh plus a dummy server NAME that blocks on a FIFO until
// killed (no child process, so nothing outlives it).
const PRELUDE = `
set -euo pipefail
source "$LIB"
ensure_dirs
mkfifo "$WORK_DIR/never" 2>/dev/null || true
dummy() {
  launch "$1" bash -c ': <"$0"' "$WORK_DIR/never" "-Dinfra.server=$1" "-Dinfra.home=$WORK_DIR"
}
# exec_done PID -> waits (up to 5 s) until the launch wrapper has exec'd the dummy
exec_done() {
  local i args=()
  for ((i = 0; i < 250; i++)); do
    mapfile -d '' -t args <"/proc/$1/cmdline" 2>/dev/null || return 1
    [[ "\${args[2]:-}" == ': <"$0"' ]] && return 0
    sleep 0.02
  done
  return 1
}
`;

const bash = (workDir: string, script: string, env: Record<string, string> = {}) => {
  const r = spawnSync("bash", ["-c", PRELUDE + script], {
    env: { ...process.env, LIB, INFRA_WORK_DIR: workDir, ...env },
    encoding: "utf8",
    timeout: 120_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
};

describe("infra/lib.sh launch and stop (dummy server)", { skip }, () => {
  let dir = "";
  let work = "";
  let other = "";
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "infra-launch-"));
    work = join(dir, "work");
    other = join(dir, "other-checkout");
  });
  after(() => {
    // Whatever a failed assertion left behind: stop every dummy of both work dirs.
    for (const w of [work, other]) {
      if (existsSync(w)) bash(w, "for n in dummy lane0 lane1; do stop_server $n 2>/dev/null || true; done");
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("200 launches (2 lanes in parallel, half under job control so that setsid forks): never reported dead, the pid file names the server, stop leaves nothing", () => {
    const r = bash(
      work,
      `
lane() {
  local name="$1" k pid again scan left bad=0
  for ((k = 0; k < 100; k++)); do
    ((k == 50)) && set -m   # background jobs lead their own process group: setsid forks
    dummy "$name"
    # Straight after launch, and again while the wrapper is (maybe) still exec'ing the server.
    for again in 1 2 3; do
      if ! pid="$(running_pid "$name")"; then
        echo "FALSE-DEAD $name $k (check $again)"
        bad=1
        break
      fi
    done
    ((bad)) && { stop_server "$name" 2>/dev/null; bad=0; continue; }
    [[ "$pid" == "$(<"$(pid_file "$name")")" ]] || echo "PIDFILE-MISMATCH $name $k"
    exec_done "$pid" || echo "NO-EXEC $name $k pid=$pid"
    scan="$(scan_pids "$name" | tr '\\n' ' ')"
    [[ "$scan" == "$pid " ]] || echo "WRONG-PID $name $k pidfile=$pid markers=[$scan]"
    stop_server "$name" 2>/dev/null
    left="$(scan_pids "$name" | tr '\\n' ' ')"
    [[ -z "$left" ]] || echo "LEFT-RUNNING $name $k pids=[$left]"
    alive "$pid" && echo "STILL-ALIVE $name $k pid=$pid"
    [[ -e "$(pid_file "$name")" ]] && echo "PIDFILE-LEFT $name $k"
    echo "LAUNCHED $name $k"
  done
}
lane lane0 & a=$!
lane lane1 & b=$!
wait "$a"; wait "$b"
`,
    );
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trim().split("\n");
    const problems = lines.filter((l) => !l.startsWith("LAUNCHED "));
    assert.deepEqual(problems, []);
    assert.equal(lines.length, 200);
  });

  it("stop and status find a server of this checkout whose pid file is missing or wrong, never another checkout's", () => {
    const started = bash(other, `dummy dummy; running_pid dummy`);
    assert.equal(started.status, 0, started.stderr);
    const otherPid = started.stdout.trim();
    const r = bash(
      work,
      `
dummy dummy
pid="$(running_pid dummy)"
rm "$(pid_file dummy)"
running_pid dummy && echo "UNEXPECTED running_pid without pid file"
echo "scan=$(scan_pids dummy | tr '\\n' ' ')"
echo "status=$(status_server dummy x || true)"
# A pid file naming an unrelated live process (this shell) is not trusted, nor is that process stopped.
echo "$$" >"$(pid_file dummy)"
running_pid dummy && echo "UNEXPECTED running_pid of an unrelated process"
stop_server dummy
alive "$pid" && echo "UNEXPECTED still alive"
echo "after=$(scan_pids dummy | tr '\\n' ' ')"
echo "ours=$pid"
`,
    );
    assert.equal(r.status, 0, r.stderr);
    const ours = /ours=(\d+)/.exec(r.stdout)?.[1];
    assert.ok(ours, r.stdout);
    assert.doesNotMatch(r.stdout, /UNEXPECTED/);
    assert.match(r.stdout, new RegExp(`scan=${ours} \n`));
    assert.match(r.stdout, new RegExp(`status=dummy +leftover pid=${ours} without a valid pid file`));
    assert.match(r.stdout, /after=\n/);
    assert.match(r.stderr, /no valid pid file; found by its -Dinfra.server\/-Dinfra.home markers/);
    assert.notEqual(ours, otherPid);
    // The other checkout's dummy (same name, other work dir) is untouched; stop it with its own scripts.
    const o = bash(other, `running_pid dummy; stop_server dummy`);
    assert.equal(o.stdout.trim(), otherPid, o.stderr);
  });

  it("a start finding a leftover of this checkout reports it, and stops it only when asked", () => {
    const r = bash(
      work,
      `
dummy dummy
pid="$(running_pid dummy)"
rm "$(pid_file dummy)"
if (check_leftovers dummy </dev/null); then echo "UNEXPECTED no refusal"; fi
alive "$pid" || echo "UNEXPECTED stopped without being asked"
INFRA_STOP_LEFTOVERS=1 check_leftovers dummy
alive "$pid" && echo "UNEXPECTED still alive"
echo done
`,
    );
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /UNEXPECTED/);
    assert.match(r.stdout, /done/);
    assert.match(r.stderr, /a dummy of this checkout \(.*\) is still running without a valid pid file: pid \d+/);
    assert.match(r.stderr, /leftover server \(pid \d+\) not stopped: run 'bash infra\/dummy.sh stop'/);
  });

  it("still recognises a server started before the home marker existed, through its pid file only", () => {
    const r = bash(
      work,
      `
setsid bash -c 'echo "$$" >"$1"; exec bash -c ": <\\"\\$0\\"" "$2" -Dinfra.server=dummy' _ "$(pid_file dummy)" "$WORK_DIR/never" \\
  </dev/null >/dev/null 2>&1 &
for ((i = 0; i < 250; i++)); do [[ -s "$(pid_file dummy)" ]] && break; sleep 0.02; done
pid="$(<"$(pid_file dummy)")"
exec_done "$pid" || echo "UNEXPECTED no exec"
[[ "$(running_pid dummy)" == "$pid" ]] || echo "UNEXPECTED legacy server not recognised"
[[ -z "$(scan_pids dummy)" ]] || echo "UNEXPECTED legacy server matched without a home marker"
stop_server dummy
alive "$pid" && echo "UNEXPECTED still alive"
echo done
`,
    );
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /UNEXPECTED/);
    assert.match(r.stdout, /done/);
  });
});
