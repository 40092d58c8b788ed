/**
 * Profile tags: labels a rule segment can select on (`{"tags": ["beta"]}` matches the profiles
 * that have every one of them). Stored sorted and without duplicates, so a profile's tags and a
 * rule's tags compare as sets.
 */
import { invalidField } from '../../shared/errors.js';

export const MAX_TAGS = 32;
export const TAG_MAX_LENGTH = 64;
const TAG_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/** True when `s` is a tag: 1–64 characters of `A-Z a-z 0-9 _ . : -`. */
export function isTag(s: string): boolean {
  return TAG_RE.test(s);
}

/**
 * Validates a tags array into its canonical form (sorted, distinct).
 * @throws PlatformError invalid_field naming `field` or `field[i]`
 */
export function parseTags(raw: unknown, field: string): string[] {
  if (!Array.isArray(raw)) throw invalidField(field, 'must be an array of tags');
  if (raw.length > MAX_TAGS) throw invalidField(field, `must have at most ${MAX_TAGS} tags`);
  raw.forEach((v, i) => {
    if (typeof v !== 'string' || !isTag(v))
      throw invalidField(`${field}[${i}]`, `must be 1 to ${TAG_MAX_LENGTH} characters of A-Z, a-z, 0-9, _ . : -`);
  });
  // Byte order, as the database compares them.
  return [...new Set(raw as string[])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
