/**
 * Since when each dependency of a stage has been failing (transient errors only), so that one
 * down for longer than a limit makes the stage not ready (/readyz, not /healthz: the process is
 * fine and restarting it would not bring Neo4j back), with a metric and a log line naming it.
 */
import type { Dependency } from "./error-class.ts";

export class DependencyHealth {
  private readonly since = new Map<Dependency, number>();

  /** A transient failure talking to `dep` at `nowMs`: starts its outage if none is open. */
  failed(dep: Dependency, nowMs: number): void {
    if (!this.since.has(dep)) this.since.set(dep, nowMs);
  }

  /** A call went through: the outages it depended on are over (every one: the call needed them all). */
  recovered(): Dependency[] {
    const ended = [...this.since.keys()];
    this.since.clear();
    return ended;
  }

  /** The dependencies failing for longer than limitMs at nowMs, with how long. */
  overdue(nowMs: number, limitMs: number): { dependency: Dependency; downMs: number }[] {
    const out: { dependency: Dependency; downMs: number }[] = [];
    for (const [dependency, since] of this.since)
      if (nowMs - since > limitMs) out.push({ dependency, downMs: nowMs - since });
    return out;
  }

  get failing(): boolean {
    return this.since.size > 0;
  }
}
