/**
 * Picks the sensory compressor from configuration (config.sensory.compressor): the ONNX token
 * classifier when asked for, or in "auto" mode when its model folder is present; the statistical
 * default otherwise. This is wiring: it loads the ONNX adapter and hands the compressor the
 * `TokenClassifier` port.
 */
import { existsSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import {
  COMPRESSOR_SETUP_HINT,
  type ExecutionProvider,
  loadTokenClassifier,
} from "../core/adapters/onnx/token-classifier.ts";
import type { Compressor } from "../core/ports.ts";
import { OnnxCompressor, type OnnxCompressorOptions } from "./onnx-compressor.ts";
import { StatisticalCompressor } from "./statistical-compressor.ts";

export interface LoadOnnxCompressorOptions extends OnnxCompressorOptions {
  executionProviders?: readonly ExecutionProvider[];
  threads?: number;
  batchSize?: number;
}

/** Loads the model folder and returns a compressor that owns (and closes) its session. */
export const loadOnnxCompressor = async (
  modelDir: string,
  opts: LoadOnnxCompressorOptions = {},
): Promise<OnnxCompressor> => {
  const classifier = await loadTokenClassifier(modelDir, {
    ...(opts.executionProviders ? { executionProviders: opts.executionProviders } : {}),
    ...(opts.threads !== undefined ? { threads: opts.threads } : {}),
    ...(opts.batchSize !== undefined ? { batchSize: opts.batchSize } : {}),
  });
  return new OnnxCompressor(classifier, {
    ownsClassifier: true,
    ...(opts.aggregation ? { aggregation: opts.aggregation } : {}),
  });
};

export interface CompressorSettings {
  kind: "auto" | "statistical" | "onnx";
  modelDir: string;
  executionProvider: ExecutionProvider;
}

export interface OpenedCompressor {
  compressor: Compressor;
  close(): Promise<void>;
}

/** The compressor's model folder: settings.modelDir, relative to the models root unless absolute. */
export const compressorModelDir = (settings: CompressorSettings, modelRoot: string): string =>
  isAbsolute(settings.modelDir) ? settings.modelDir : join(modelRoot, settings.modelDir);

export const openConfiguredCompressor = async (
  settings: CompressorSettings,
  modelRoot: string,
): Promise<OpenedCompressor> => {
  const dir = compressorModelDir(settings, modelRoot);
  const present = existsSync(join(dir, "manifest.json"));
  if (settings.kind === "statistical" || (settings.kind === "auto" && !present)) {
    return { compressor: new StatisticalCompressor(), close: async () => {} };
  }
  if (!present) {
    throw new Error(
      `sensory.compressor.kind is "onnx" but ${join(dir, "manifest.json")} is missing. ${COMPRESSOR_SETUP_HINT}`,
    );
  }
  const executionProviders: ExecutionProvider[] = settings.executionProvider === "cuda" ? ["cuda", "cpu"] : ["cpu"];
  const compressor = await loadOnnxCompressor(dir, { executionProviders });
  return { compressor, close: () => compressor.close() };
};
