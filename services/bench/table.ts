/** Markdown rendering helpers, pure. */

export const markdownTable = (header: readonly string[], rows: readonly (readonly string[])[]): string => {
  const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");
  const line = (cells: readonly string[]) => `| ${cells.map(cell).join(" | ")} |`;
  const align = header.map((_, i) => (i === 0 ? "---" : "---:"));
  return [line(header), line(align), ...rows.map(line)].join("\n");
};

/** A number with fixed digits; "–" for a missing value. */
export const fmt = (v: number | null | undefined, digits = 3): string =>
  v === null || v === undefined || Number.isNaN(v) ? "–" : v.toFixed(digits);

export const fmtInt = (v: number | null | undefined): string =>
  v === null || v === undefined || Number.isNaN(v) ? "–" : Math.round(v).toLocaleString("en-US");
