/**
 * The import-rule checker (`npm run check:imports`, .dependency-cruiser.cjs): it sees our `./x.ts`
 * imports, type-only ones included, and reports each rule's violation in a small tree written for
 * the test; and the real tree has none (no circles, stages side by side, nothing below the front
 * door imports gateway/, adapters apart).
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { IConfiguration } from "dependency-cruiser";
import { checkImports, describeViolation, importsKeptJs } from "../../scripts/import-rules.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const rules = createRequire(import.meta.url)(join(root, ".dependency-cruiser.cjs")) as IConfiguration;

const tree = (files: Record<string, string>): string => {
  const dir = mkdtempSync(join(tmpdir(), "import-rules-test-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
};

describe("import-rule checker", () => {
  it("keeps type-only imports and re-exports when it strips the types", () => {
    const js = importsKeptJs(
      [
        'import type { A } from "./a.ts";',
        'import { type B, C } from "./b.ts";',
        'export type { D } from "./d.ts";',
        "export type E = A;",
        'export const f = async (): Promise<unknown> => import("./f.ts");',
      ].join("\n"),
      "x.ts",
    );
    for (const spec of ["./a.ts.js", "./b.ts.js", "./d.ts.js", "./f.ts.js"]) assert.ok(js.includes(`"${spec}"`), spec);
  });

  it("reports every rule's violation in a tree with one of each, and nothing for allowed imports", async () => {
    const dir = tree({
      "services/core/types.ts": "export type Id = string;\n",
      "services/sensory/ok.ts": 'import type { Id } from "../core/types.ts";\nexport const id: Id = "x";\n',
      "services/encoder/a.ts": 'import type { B } from "../indexer/b.ts";\nexport type A = B;\n',
      "services/indexer/b.ts": "export type B = number;\n",
      "services/core/x.ts": 'import type { Y } from "./y.ts";\nexport type X = Y | 1;\n',
      "services/core/y.ts": 'import type { X } from "./x.ts";\nexport type Y = X | 2;\n',
      "services/core/adapters/neo4j/g.ts": 'export { c } from "../sqlite/c.ts";\n',
      "services/core/adapters/sqlite/c.ts": "export const c = 1;\n",
      "services/core/adapters/openai/llm.ts": 'import { meter } from "../llm-factory.ts";\nexport const m = meter;\n',
      "services/core/adapters/llm-factory.ts": "export const meter = 1;\n",
      "services/core/p.ts": 'import { serve } from "../gateway/m.ts";\nexport const s = serve;\n',
      "services/gateway/m.ts": 'import { readFileSync } from "node:fs";\nexport const serve = readFileSync;\n',
      "services/core/q.ts": 'import { z } from "../query/z.ts";\nexport const q = z;\n',
      "services/query/z.ts": "export const z = 1;\n",
      "services/core/lost.ts": 'import { gone } from "./missing.ts";\nexport const l = gone;\n',
    });
    try {
      const { modules, violations } = await checkImports(dir, rules);
      assert.ok(modules >= 15, `cruised ${modules} modules`);
      const lines = violations.map(describeViolation).sort();
      assert.deepEqual(
        lines.filter((l) => !l.startsWith("no-circular")),
        [
          "adapters-apart: services/core/adapters/neo4j/g.ts -> services/core/adapters/sqlite/c.ts",
          "adapters-not-to-factories: services/core/adapters/openai/llm.ts -> services/core/adapters/llm-factory.ts",
          "core-below-stages: services/core/q.ts -> services/query/z.ts",
          "no-gateway-below-front-door: services/core/p.ts -> services/gateway/m.ts",
          "resolvable: services/core/lost.ts -> ./missing.ts",
          "stages-side-by-side: services/encoder/a.ts -> services/indexer/b.ts",
        ],
      );
      const circles = violations.filter((v) => v.rule === "no-circular");
      assert.ok(circles.length > 0, "the type-only circle x.ts <-> y.ts is seen");
      for (const c of circles) assert.deepEqual([c.from, c.to].sort(), ["services/core/x.ts", "services/core/y.ts"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("finds no violation in services/", async () => {
    const { modules, violations } = await checkImports(root);
    assert.ok(modules > 100, `cruised ${modules} modules`);
    assert.deepEqual(violations.map(describeViolation), []);
  });
});
