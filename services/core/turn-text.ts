/**
 * The text a turn is embedded as, by the boundary gate and for the raw-turn route alike: one
 * string for both lets the embedding cache serve the second use, and the speaker's name helps a
 * question that names a person find what that person said.
 */
export const turnEmbeddingText = (speaker: string, text: string): string => `${speaker}: ${text}`;
