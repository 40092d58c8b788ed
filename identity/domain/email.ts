/**
 * Email addresses on the write side: one normal form (trimmed, lower-cased) for the reservation
 * table and the events, and a deliberately plain validity check (one @, a dot in the domain, no
 * spaces, RFC 5321 length limits). Deliverability is the notifier's business, not this check's.
 */

const MAX_LENGTH = 254;
const MAX_LOCAL = 64;
const EMAIL_RE = /^[^\s@<>()[\]\\,;:"]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$/;

export function normalizeEmail(raw: string): string {
  return raw.trim().toLowerCase();
}

/** True for an address in normal form that this service accepts. */
export function isValidEmail(email: string): boolean {
  if (email.length === 0 || email.length > MAX_LENGTH) return false;
  const at = email.lastIndexOf('@');
  if (at < 1 || at > MAX_LOCAL) return false;
  return EMAIL_RE.test(email);
}
