import { z } from "zod";

/** Most characters (code points) a tenant name may have. */
export const MAX_TENANT_NAME_LENGTH = 128;

/**
 * The tenant-name alphabet: Unicode letters, marks, digits, punctuation and symbols (so `/`, `:`,
 * `%`, `.`, `-`, `@`, emoji are allowed) and the plain space, which may not lead or end the name.
 * Left out: control characters (NUL, tab, newline...), format characters (zero-width joiners,
 * bidi controls), other whitespace, unpaired surrogates and private-use code points: characters
 * that print as nothing or as something else, so two names that look the same would be two tenants.
 * Keys built from tenant names escape what they must (services/core/keys.ts); this rule keeps
 * names readable in logs and the NUL separator of hashed ids out of them.
 */
const TENANT_CHARACTERS = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]+$/u;

export const TenantNameSchema = z
  .string()
  .refine((s) => [...s].length >= 1 && [...s].length <= MAX_TENANT_NAME_LENGTH, {
    message: `a tenant name must have 1 to ${MAX_TENANT_NAME_LENGTH} characters`,
  })
  .refine((s) => s === "" || TENANT_CHARACTERS.test(s), {
    message:
      "a tenant name may hold only Unicode letters, marks, digits, punctuation, symbols and spaces (no control or format characters, tabs or newlines)",
  })
  .refine((s) => s.trim() === s, { message: "a tenant name may not start or end with a space" });
