/**
 * Picks the sensory compressor from configuration (config.sensory.compressor): the ONNX token
 * classifier when asked for, or in "auto" mode when its model folder is present; the statistical
 * default otherwise.
 */
import { existsSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { COMPRESSOR_SETUP_HINT, type ExecutionProvider } from "../core/adapters/onnx/token-classifier.ts";
import type { Compressor } from "../core/ports.ts";
import { loadOnnxCompressor } from "./onnx-compressor.ts";
import { StatisticalCompressor } from "./statistical-compressor.ts";

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
