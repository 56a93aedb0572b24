/**
 * What the packer reads in a record's statement to write its line (the statement's parts come from
 * `recordParts`, services/core/text/record-text.ts, the module that writes the format).
 */

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Whether the statement opens with the speaker's name as a word ("Ana went …", "Ana's dog …"). */
export const opensWithName = (statement: string, name: string): boolean =>
  name !== "" && new RegExp(`^${escapeRegExp(name)}(?![\\p{L}\\p{N}])`, "u").test(statement);
