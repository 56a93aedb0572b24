/** The distributed consolidator's settings from the configuration (Config.consolidation). */
import type { Config } from "../core/config.ts";
import { parseWindow, type ScheduleSettings } from "./scheduler.ts";

/** The off-peak triggers, as the embedded runtime reads them, plus the lag trigger. */
export const scheduleFrom = (
  c: Pick<Config["consolidation"], "window" | "idleMinutes" | "maxInboxLag" | "lagThreshold">,
): ScheduleSettings => {
  const window = parseWindow(c.window);
  return {
    idleMs: c.idleMinutes * 60_000,
    maxInboxLag: c.maxInboxLag,
    ...(window ? { window } : {}),
    ...(c.lagThreshold !== undefined ? { lagThreshold: c.lagThreshold } : {}),
  };
};

/**
 * Crash injection for the restart tests only: MEMORY_CONSOLIDATOR_CRASH_AT_DECISION=N kills the
 * process (SIGKILL, no clean-up) inside the transaction of the first decision that finds N decisions
 * of its run committed. Unset in every deployment.
 */
export const crashHookFromEnv = (
  env: NodeJS.ProcessEnv,
): ((ordinal: number, committed: number) => void) | undefined => {
  const raw = env.MEMORY_CONSOLIDATOR_CRASH_AT_DECISION;
  if (raw === undefined || raw === "") return undefined;
  const at = Number(raw);
  if (!Number.isInteger(at) || at < 0) throw new Error(`MEMORY_CONSOLIDATOR_CRASH_AT_DECISION: not a count: ${raw}`);
  return (_ordinal, committed) => {
    if (committed >= at) process.kill(process.pid, "SIGKILL");
  };
};
