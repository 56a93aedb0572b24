/**
 * `npm run check:imports`: the import rules of .dependency-cruiser.cjs over services/ (see
 * scripts/import-rules.ts). Prints one line per violation; exits 1 when there is any.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkImports, describeViolation } from "./import-rules.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { modules, violations } = await checkImports(root);
for (const v of violations) console.log(describeViolation(v));
console.log(`${modules} modules cruised, ${violations.length} import rule violation(s)`);
process.exit(violations.length > 0 || modules === 0 ? 1 : 0);
