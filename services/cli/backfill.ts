/**
 * `memory backfill-second-opinion [--tenant t]`: gives the items written before MEMORY_SECOND_OPINION
 * was on their second-opinion vectors (composition/second-opinion-backfill.ts), in the configured
 * stores: the data folder by default, Neo4j with MEMORY_STORE=neo4j (the distributed runtime's).
 * Without it such a store still answers with the second opinion, but each question embeds its
 * candidates with the second model at query time.
 */
import type { Command } from "commander";
import { openSecondOpinionEmbedder } from "../composition/parts.ts";
import {
  type BackfillReport,
  backfillSecondVectors,
  canBackfill,
  DEFAULT_BACKFILL_BATCH,
} from "../composition/second-opinion-backfill.ts";
import { openStores } from "../composition/stores.ts";
import type { Config } from "../core/config.ts";
import { tenantFromArg, UsageError } from "./usage.ts";

export const formatBackfillReport = (r: BackfillReport): string =>
  `tenant "${r.tenant}": ${r.set} items given a second-opinion vector` +
  (r.withoutText > 0 ? `, ${r.withoutText} without a stored text left as they were` : "") +
  (r.gone > 0 ? `, ${r.gone} deleted meanwhile` : "") +
  `; ${(r.ms / 1000).toFixed(1)} s`;

export const runBackfillSecondOpinion = async (
  config: Config,
  o: { tenant?: string; batch?: number; json?: boolean },
): Promise<BackfillReport[]> => {
  if (!config.secondOpinion.enabled) {
    throw new UsageError(
      "the second opinion is off: run with MEMORY_SECOND_OPINION=1 (and the variant the service uses, MEMORY_SECOND_OPINION_VARIANT)",
    );
  }
  const only = o.tenant !== undefined ? tenantFromArg(o.tenant) : undefined;
  const embedder = await openSecondOpinionEmbedder(config);
  if (!embedder) throw new Error("the second-opinion model did not open");
  try {
    const stores = await openStores(config);
    try {
      if (!canBackfill(stores.vectors)) {
        throw new Error(`the vector store (${stores.label}) keeps no second-opinion vectors: nothing to backfill`);
      }
      const tenants = only !== undefined ? [only] : await stores.vectors.tenantsNamed?.("");
      if (tenants === undefined)
        throw new UsageError(`the vector store (${stores.label}) cannot list its tenants: name one with --tenant`);
      const reports: BackfillReport[] = [];
      for (const tenant of tenants) {
        const report = await backfillSecondVectors({ graph: stores.graph, vectors: stores.vectors, embedder }, tenant, {
          batch: o.batch ?? DEFAULT_BACKFILL_BATCH,
          ...(o.json ? {} : { onProgress: (r) => process.stderr.write(`\r${formatBackfillReport(r)}`) }),
        });
        if (!o.json) process.stderr.write("\n");
        reports.push(report);
        if (!o.json) console.log(formatBackfillReport(report));
      }
      if (o.json) console.log(JSON.stringify(reports, null, 2));
      else if (tenants.length === 0) console.log("no tenant holds any vector: nothing to backfill");
      return reports;
    } finally {
      await stores.close();
    }
  } finally {
    await embedder.close();
  }
};

export const registerBackfillCommand = (program: Command, config: () => Config, int: (v: string) => number): void => {
  program
    .command("backfill-second-opinion")
    .description(
      "give the items written before MEMORY_SECOND_OPINION was on their second-opinion vectors (run with the setting on)",
    )
    .option("--tenant <tenant>", "only this tenant (default: every tenant of the vector store)")
    .option("--batch <n>", `items per step (default ${DEFAULT_BACKFILL_BATCH})`, int)
    .option("--json", "print the reports as JSON")
    .action(async (o: { tenant?: string; batch?: number; json?: boolean }) => {
      await runBackfillSecondOpinion(config(), o);
    });
};
