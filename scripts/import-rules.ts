/**
 * The import-rule checker: the rules of .dependency-cruiser.cjs over the imports of services/ (and
 * of the TypeScript client, clients/typescript/src).
 *
 * dependency-cruiser reads .ts files only through the `typescript` package's JavaScript API (or
 * swc / babel), and TypeScript 7 has none; its CLI also refuses Node 20. So this calls its API over
 * a copy of services/ in a temporary folder where each x.ts becomes x.ts.js: the TypeScript syntax
 * stripped by esbuild (tsx's own transformer) with verbatimModuleSyntax, after `import type` and
 * `export type {…} from` are turned into plain imports, so that type-only imports still count
 * (a circle through types is still a circle). Relative `./y.ts` specifiers become `./y.ts.js`;
 * module paths are mapped back to .ts in what this returns.
 */
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { cruise, type IConfiguration, type IViolation } from "dependency-cruiser";
import { transformSync } from "esbuild";

export interface ImportViolation {
  rule: string;
  from: string;
  to: string;
  /** For a circle: the modules around it, starting after `from`. */
  cycle?: string[];
}

export interface ImportCheck {
  /** Modules cruised (a sanity figure: 0 means nothing was read). */
  modules: number;
  violations: ImportViolation[];
}

const TYPE_IMPORT = /^(\s*)import\s+type\s+/gm;
const TYPE_REEXPORT = /^(\s*)export\s+type\s+(?=[{*])/gm;
const RELATIVE_TS = /(["'])(\.{1,2}\/[^"'\n]*?)\.ts\1/g;

/** The JavaScript a cruiser can parse, with every import of the TypeScript source kept. */
export const importsKeptJs = (source: string, file: string): string => {
  const plain = source.replace(TYPE_IMPORT, "$1import ").replace(TYPE_REEXPORT, "$1export ");
  const js = transformSync(plain, {
    loader: "ts",
    format: "esm",
    sourcefile: file,
    tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true } },
  }).code;
  return js.replace(RELATIVE_TS, "$1$2.ts.js$1");
};

const walk = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : [],
  );

/** The folders cruised: the services, and the TypeScript client's source where the tree has it. */
const cruised = (root: string): string[] =>
  ["services", "clients/typescript/src"].filter((dir) => dir === "services" || existsSync(join(root, dir)));

/** Copies the cruised folders of root into a temporary folder as parseable JavaScript; returns its root. */
const mirror = (root: string): string => {
  const out = mkdtempSync(join(tmpdir(), "import-rules-"));
  for (const file of cruised(root).flatMap((dir) => walk(join(root, dir)))) {
    const rel = relative(root, file);
    const target = join(out, rel);
    mkdirSync(dirname(target), { recursive: true });
    if (file.endsWith(".ts")) writeFileSync(`${target}.js`, importsKeptJs(readFileSync(file, "utf8"), rel));
    else if (/\.(m|c)?js$|\.json$/.test(file)) copyFileSync(file, target);
  }
  // Packages resolve (and are not followed): a bare import is an npm module, not an unresolved one.
  symlinkSync(join(root, "node_modules"), join(out, "node_modules"), "dir");
  return out;
};

const back = (path: string): string => path.replace(/\.ts\.js$/, ".ts");

/** Runs the rules of `config` (default: root/.dependency-cruiser.cjs) over root/services. */
export const checkImports = async (root: string, config?: IConfiguration): Promise<ImportCheck> => {
  const ruleSet: IConfiguration =
    config ?? (createRequire(import.meta.url)(join(root, ".dependency-cruiser.cjs")) as IConfiguration);
  const base = mirror(root);
  try {
    const result = await cruise(cruised(root), {
      ...ruleSet.options,
      baseDir: base,
      ruleSet: { forbidden: ruleSet.forbidden ?? [] },
      validate: true,
    });
    if (typeof result.output === "string") throw new Error("dependency-cruiser returned text, not a result");
    const violations = result.output.summary.violations.map(
      (v: IViolation): ImportViolation => ({
        rule: v.rule.name,
        from: back(v.from),
        to: back(v.to),
        ...(v.cycle ? { cycle: v.cycle.map((c) => back(c.name)) } : {}),
      }),
    );
    return { modules: result.output.summary.totalCruised, violations };
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
};

/** One line per violation, e.g. `stages-side-by-side: services/a/x.ts -> services/b/y.ts`. */
export const describeViolation = (v: ImportViolation): string =>
  `${v.rule}: ${v.from} -> ${v.to}${v.cycle ? ` (circle: ${[v.from, ...v.cycle].join(" -> ")})` : ""}`;
