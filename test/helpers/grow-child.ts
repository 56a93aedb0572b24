/**
 * Child process for the scale bench's kill test (test/unit/bench-scale.test.ts): grows a store
 * with `--grow-store` semantics (runScaleBench growStore) on a hashing embedder, and prints
 * "embedded <n>" after each embedding call and every log line of the bench, so that the parent
 * can SIGKILL it at a known point of the build. Its options are the test's growOptions.
 */
import { join } from "node:path";
import { runScaleBench } from "../../services/bench/scale.ts";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";

const [data, storeDir, sizesArg] = process.argv.slice(2);
if (!data || !storeDir || !sizesArg) throw new Error("usage: grow-child <locomo.json> <storeDir> <size,size,...>");
const inner = new HashingEmbedder(64);
let calls = 0;
await runScaleBench({
  config: { ...loadConfig({}), modelDir: join(storeDir, "..", "no-models") },
  data,
  sizes: sizesArg.split(",").map(Number),
  queries: 2,
  tenants: 3,
  growStore: storeDir,
  embedder: {
    id: inner.id,
    dimension: inner.dimension,
    stats: () => inner.stats(),
    embed: async (texts: readonly string[]) => {
      const vectors = await inner.embed(texts);
      console.log(`embedded ${++calls}`);
      return vectors;
    },
  },
  out: null,
  progress: false,
  log: (line) => console.log(line),
});
console.log("done");
