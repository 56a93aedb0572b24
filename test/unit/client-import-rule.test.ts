/**
 * The TypeScript client stands alone (.dependency-cruiser.cjs, rule client-stands-alone): the
 * import-rule checker cruises clients/typescript/src too, and reports an import of services/ from
 * it and an import it cannot resolve.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { IConfiguration } from "dependency-cruiser";
import { checkImports, describeViolation } from "../../scripts/import-rules.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const rules = createRequire(import.meta.url)(join(root, ".dependency-cruiser.cjs")) as IConfiguration;

describe("import rule of the TypeScript client", () => {
  it("reports the client importing services/ and an unresolvable client import", async () => {
    const dir = mkdtempSync(join(tmpdir(), "client-import-rule-"));
    const files: Record<string, string> = {
      "services/core/ids.ts": "export const id = 1;\n",
      "clients/typescript/src/ok.ts": "export const ok = 1;\n",
      "clients/typescript/src/index.ts":
        'import { ok } from "./ok.ts";\nimport { id } from "../../../services/core/ids.ts";\nimport { gone } from "./missing.ts";\nexport const all = [ok, id, gone];\n',
    };
    try {
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), text);
      }
      const { modules, violations } = await checkImports(dir, rules);
      assert.ok(modules >= 3, `cruised ${modules} modules`);
      assert.deepEqual(violations.map(describeViolation).sort(), [
        "client-stands-alone: clients/typescript/src/index.ts -> services/core/ids.ts",
        "resolvable: clients/typescript/src/index.ts -> ./missing.ts",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
