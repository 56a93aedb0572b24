/**
 * Off-peak triggers for the sleep-time consolidator: a daily UTC window ("01:00-05:00", may wrap
 * past midnight), an idle trigger (no ingest for a while and the inbox lag low) and, in the
 * distributed runtime, a lag trigger (the upstream stages have caught up). The decision
 * is pure (`dueReason`); `ConsolidationScheduler` polls it on an unref'd timer with an injectable
 * clock, runs one consolidation at a time, and only when there is pending work.
 */

export interface DailyWindow {
  /** Minutes after 00:00 UTC, inclusive. */
  startMin: number;
  /** Minutes after 00:00 UTC, exclusive; smaller than startMin when the window wraps past midnight. */
  endMin: number;
}

/** "HH:MM-HH:MM" (UTC) -> window; "" -> undefined (no window). Throws on anything else. */
export const parseWindow = (spec: string | undefined): DailyWindow | undefined => {
  const s = (spec ?? "").trim();
  if (s === "") return undefined;
  const m = /^(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})$/.exec(s);
  if (!m) throw new Error(`consolidation window: expected "HH:MM-HH:MM" (UTC), got "${s}"`);
  const [h1, m1, h2, m2] = [m[1], m[2], m[3], m[4]].map(Number) as [number, number, number, number];
  if (h1 > 24 || h2 > 24 || m1 > 59 || m2 > 59 || h1 * 60 + m1 > 1440 || h2 * 60 + m2 > 1440)
    throw new Error(`consolidation window: "${s}" is not a time range within a day`);
  const startMin = h1 * 60 + m1;
  const endMin = h2 * 60 + m2;
  if (startMin === endMin) throw new Error(`consolidation window: "${s}" is empty`);
  return { startMin, endMin };
};

export const inWindow = (nowMs: number, w: DailyWindow): boolean => {
  const d = new Date(nowMs);
  const min = d.getUTCHours() * 60 + d.getUTCMinutes();
  return w.startMin < w.endMin ? min >= w.startMin && min < w.endMin : min >= w.startMin || min < w.endMin;
};

export interface ScheduleSettings {
  window?: DailyWindow;
  /** Run after this long without ingest (0: no idle trigger). */
  idleMs: number;
  /** The idle trigger also needs the inbox lag (accepted, not yet processed entries) at or below this. */
  maxInboxLag: number;
  /** Run whenever the inbox lag is at or below this (undefined: no lag trigger). */
  lagThreshold?: number;
}

export interface ScheduleProbe {
  nowMs: number;
  lastActivityMs: number;
  inboxLag: number;
  pending: number;
}

export type TriggerReason = "window" | "idle" | "lag";

/** Why a consolidation is due now, or undefined (pure). Nothing is due without pending candidates. */
export const dueReason = (s: ScheduleSettings, p: ScheduleProbe): TriggerReason | undefined => {
  if (p.pending <= 0) return undefined;
  if (s.window && inWindow(p.nowMs, s.window)) return "window";
  if (s.idleMs > 0 && p.nowMs - p.lastActivityMs >= s.idleMs && p.inboxLag <= s.maxInboxLag) return "idle";
  if (s.lagThreshold !== undefined && p.inboxLag <= s.lagThreshold) return "lag";
  return undefined;
};

export interface SchedulerHooks {
  clock: () => number;
  lastActivityMs: () => number;
  inboxLag: () => number;
  pending: () => Promise<number>;
  run: (reason: TriggerReason) => Promise<unknown>;
  onError?: (err: unknown) => void;
}

export class ConsolidationScheduler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<TriggerReason | undefined> | undefined;
  /** Runs started by the scheduler (observability and tests). */
  runs = 0;

  constructor(
    private readonly settings: ScheduleSettings,
    private readonly hooks: SchedulerHooks,
    private readonly checkIntervalMs = 60_000,
  ) {}

  get enabled(): boolean {
    return this.settings.window !== undefined || this.settings.idleMs > 0 || this.settings.lagThreshold !== undefined;
  }

  start(): void {
    if (this.timer || !this.enabled) return;
    this.timer = setInterval(() => void this.tick(), this.checkIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Checks the triggers once and runs a consolidation when one is due; resolves with the reason (or undefined). */
  tick(): Promise<TriggerReason | undefined> {
    if (this.running) return this.running;
    this.running = (async () => {
      try {
        const reason = dueReason(this.settings, {
          nowMs: this.hooks.clock(),
          lastActivityMs: this.hooks.lastActivityMs(),
          inboxLag: this.hooks.inboxLag(),
          pending: await this.hooks.pending(),
        });
        if (reason) {
          this.runs++;
          await this.hooks.run(reason);
        }
        return reason;
      } catch (err) {
        this.hooks.onError?.(err);
        return undefined;
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  /** Resolves when a tick in progress (if any) has finished. */
  async idle(): Promise<void> {
    await this.running;
  }
}
