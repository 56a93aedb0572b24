/**
 * The distributed consolidator's Prometheus series (on the process's own registry). The alert
 * "consolidation not run in 24 h" (k8s/components/monitoring) reads the last-run timestamp
 * together with the service's own update-queue lag: it fires only while there is work waiting.
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { ConsolidationReport } from "./types.ts";
import type { PartitionLag } from "./upstream.ts";

export type RunOutcome = "ok" | "error";

export class ConsolidatorMetrics {
  private readonly lastRun: Gauge;
  private readonly runs: Counter<"trigger" | "outcome">;
  private readonly decisions: Counter<"decision">;
  private readonly runSeconds: Histogram;
  private readonly windowOpen: Gauge;
  private readonly lag: Gauge<"stage" | "topic" | "partition">;
  private readonly upstreamLag: Gauge;
  private readonly skipped: Counter<"reason">;
  private readonly checks: Counter;

  constructor(registry: Registry, startedAtMs = Date.now()) {
    const registers = [registry];
    this.lastRun = new Gauge({
      name: "memory_consolidation_last_run_timestamp_seconds",
      help: "When the last consolidation run finished successfully (Unix seconds; the process start until the first run).",
      registers,
    });
    this.lastRun.set(startedAtMs / 1000);
    this.runs = new Counter({
      name: "memory_consolidation_runs_total",
      help: "Consolidation runs (one per tenant of a consumed batch), by trigger (window, idle, lag) and outcome.",
      labelNames: ["trigger", "outcome"],
      registers,
    });
    this.decisions = new Counter({
      name: "memory_consolidation_decisions_total",
      help: "What consolidation runs did: records merged, superseded, linked, examined records unchanged, candidate pairs dropped.",
      labelNames: ["decision"],
      registers,
    });
    this.runSeconds = new Histogram({
      name: "memory_consolidation_run_seconds",
      help: "Duration of one consolidation run (one tenant).",
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900],
      registers,
    });
    this.windowOpen = new Gauge({
      name: "memory_consolidation_window_open",
      help: "1 while an off-peak trigger holds and the update-queue partitions are consumed, 0 while they are paused.",
      registers,
    });
    this.lag = new Gauge({
      name: "memory_consumer_lag",
      help: "Messages behind the high watermark, per input partition of the stage's consumer group.",
      labelNames: ["stage", "topic", "partition"],
      registers,
    });
    this.upstreamLag = new Gauge({
      name: "memory_consolidation_upstream_lag",
      help: "Total consumer lag of the upstream stage groups, as the lag trigger sees it.",
      registers,
    });
    this.checks = new Counter({
      name: "memory_consolidation_gate_checks_total",
      help: "Times the off-peak triggers were evaluated (the partitions paused or resumed accordingly).",
      registers,
    });
    this.skipped = new Counter({
      name: "memory_consolidation_skipped_messages_total",
      help: "Update-queue messages skipped: tombstones and values that do not decode.",
      labelNames: ["reason"],
      registers,
    });
  }

  ran(trigger: string, report: ConsolidationReport, nowMs = Date.now()): void {
    this.runs.inc({ trigger, outcome: "ok" });
    this.lastRun.set(nowMs / 1000);
    this.runSeconds.observe(report.ms / 1000);
    this.decisions.inc({ decision: "merged" }, report.merged);
    this.decisions.inc({ decision: "superseded" }, report.superseded);
    this.decisions.inc({ decision: "linked" }, report.linked);
    this.decisions.inc({ decision: "unchanged" }, report.unchanged);
    this.decisions.inc({ decision: "dropped" }, report.dropped);
  }

  failed(trigger: string): void {
    this.runs.inc({ trigger, outcome: "error" });
  }

  gate(open: boolean): void {
    this.windowOpen.set(open ? 1 : 0);
  }

  checked(): void {
    this.checks.inc();
  }

  ownLag(topic: string, lags: readonly PartitionLag[]): void {
    for (const p of lags) this.lag.set({ stage: "consolidator", topic, partition: String(p.partition) }, p.lag);
  }

  upstream(n: number): void {
    this.upstreamLag.set(n);
  }

  skip(reason: "tombstone" | "decode"): void {
    this.skipped.inc({ reason });
  }
}
