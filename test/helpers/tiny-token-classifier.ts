/**
 * The tiny LLMLingua-2-shaped ONNX token classifier the tests generate (random weights, fixed
 * seed) with infra/models/make_tiny_token_classifier.py, run by the Python that
 * `node scripts/setup.mjs` creates in models/.venv.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const PYTHON = join(ROOT, "models/.venv/bin/python");
const SCRIPT = join(ROOT, "infra/models/make_tiny_token_classifier.py");

/** A test's skip reason when the model cannot be generated here, else false. */
export const tinyClassifierSkip: string | false = existsSync(PYTHON)
  ? false
  : `${PYTHON} is missing (it is created by \`node scripts/setup.mjs\`); it is needed to generate the tiny ONNX model`;

/** Writes model.onnx, tokenizer.json, tokenizer_config.json and manifest.json into `dir`. */
export const makeTinyTokenClassifier = (dir: string, args: readonly string[]): void => {
  execFileSync(PYTHON, [SCRIPT, dir, ...args], { stdio: "pipe" });
};
