/**
 * CPU seconds of other processes (Linux `/proc/<pid>/stat`): the freshness bench's stage processes
 * and, when this checkout's infra runs them, the servers they talk to (Kafka, the schema registry,
 * Neo4j). On one machine the distributed runtime's wall time is bounded below by all of that CPU
 * over the cores, so the bench reports the servers' share beside the stages'.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/**
 * utime + stime in seconds from a `/proc/<pid>/stat` line; undefined when it does not parse. The
 * command name (field 2) is in parentheses and may hold spaces and ")", so fields are counted
 * from the last ")": utime and stime are fields 14 and 15 of the line.
 */
export const parseCpuSeconds = (stat: string): number | undefined => {
  const close = stat.lastIndexOf(")");
  if (close < 0) return undefined;
  const fields = stat.slice(close + 2).split(" ");
  const [utime, stime] = [Number(fields[11]), Number(fields[12])];
  return Number.isFinite(utime) && Number.isFinite(stime) && fields.length > 12
    ? (utime + stime) / TICKS_PER_SECOND
    : undefined;
};

/** CPU seconds a process has used so far; undefined when it is gone or `/proc` does not say (not Linux). */
export const cpuSecondsOf = (pid: number | undefined): number | undefined => {
  if (pid === undefined) return undefined;
  try {
    return parseCpuSeconds(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return undefined;
  }
};

/**
 * Starts counting the CPU of named processes now; the function it returns gives each one's CPU
 * seconds since then, for the processes `/proc` reports both times (a process gone meanwhile, or
 * not Linux, is left out).
 */
export const cpuSince = (
  processes: Iterable<readonly [name: string, pid: number | undefined]>,
): (() => Record<string, number>) => {
  const started = [...processes].map(([name, pid]) => ({ name, pid, before: cpuSecondsOf(pid) }));
  return () => {
    const used: Record<string, number> = {};
    for (const { name, pid, before } of started) {
      const after = cpuSecondsOf(pid);
      if (before !== undefined && after !== undefined) used[name] = after - before;
    }
    return used;
  };
};

/** The servers infra/ starts, by the name of their pid file under its run folder. */
export const INFRA_SERVERS = ["kafka", "registry", "neo4j"] as const;

/**
 * The running servers of an infra work folder (infra/lib.sh: `<work>/run/<name>.pid`, the server's
 * own JVM): name → pid, for each pid file that holds a number whose process is alive. Servers
 * started elsewhere (another checkout, a cluster) are not found, and the bench then reports only the
 * stage processes.
 */
export const infraServerPids = (workDir: string): Record<string, number> => {
  const found: Record<string, number> = {};
  for (const name of INFRA_SERVERS) {
    let pid: number;
    try {
      pid = Number(readFileSync(join(workDir, "run", `${name}.pid`), "utf8").trim());
    } catch {
      continue; // no pid file: infra does not run that server here
    }
    if (Number.isInteger(pid) && pid > 0 && cpuSecondsOf(pid) !== undefined) found[name] = pid;
  }
  return found;
};
