/**
 * A recipient's contact details and the validation of `PUT /api/v1/users/{user_id}/profile`.
 *
 * PUT replaces the whole profile: a field left out (or `null`) is cleared. Values are stored in
 * one canonical form:
 * - `email`: one address, `local@domain`, at most 254 characters, no white space, quotes, angle
 *   brackets or control characters (so it can never smuggle a header or a second recipient); the
 *   domain is lower-cased and needs a dot;
 * - `phone`: E.164, `+` and 2 to 15 digits, the first not 0 (`+14155550123`); nothing else (no
 *   spaces or dashes), so what is stored is what the SMS provider is given;
 * - `locale`: `xx` or `xx_YY` (`en-us` is stored `en_US`);
 * - `timezone`: an IANA zone name that this runtime's Intl knows (`Europe/Paris`, `UTC`), stored
 *   as Intl resolves it (`europe/paris` → `Europe/Paris`). Offsets like `+02:00` are refused: quiet
 *   hours need the zone's daylight-saving rules, not today's offset;
 * - `tags`: up to 32 labels of 1–64 characters `A-Z a-z 0-9 _ . : -` that rule segments select on
 *   (notifier/segments), stored sorted and distinct (tags.ts).
 */
import { invalidField } from '../../shared/errors.js';
import { canonicalLocale } from '../templates/locale.js';
import { parseTags } from './tags.js';

export interface Profile {
  user_id: string;
  email?: string;
  phone?: string;
  /** Canonical `xx` or `xx_YY`. */
  locale?: string;
  /** IANA zone name. */
  timezone?: string;
  /** Sorted, distinct; absent when the profile has none. */
  tags?: string[];
}

export type ProfileFields = Omit<Profile, 'user_id'>;

export const EMAIL_MAX_LENGTH = 254;
const EMAIL_RE =
  /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)$/;
const E164_RE = /^\+[1-9][0-9]{1,14}$/;
const TZ_SHAPE_RE = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+){0,3}$/;

/** The canonical address, or undefined when `s` is not one we accept. */
export function canonicalEmail(s: string): string | undefined {
  if (s.length > EMAIL_MAX_LENGTH) return undefined;
  const m = EMAIL_RE.exec(s);
  if (!m) return undefined;
  const at = s.lastIndexOf('@');
  return `${s.slice(0, at)}@${s.slice(at + 1).toLowerCase()}`;
}

export function isE164(s: string): boolean {
  return E164_RE.test(s);
}

/** The IANA zone as Intl names it, or undefined when Intl does not know `s`. */
export function canonicalTimeZone(s: string): string | undefined {
  if (s.length > 64 || !TZ_SHAPE_RE.test(s)) return undefined;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: s }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

const FIELDS = ['email', 'phone', 'locale', 'timezone', 'tags'] as const;

function optionalString(body: Record<string, unknown>, field: string): string | undefined {
  const v = body[field];
  if (v === null || v === undefined) return undefined;
  if (typeof v !== 'string') throw invalidField(field, 'must be a string');
  return v;
}

/** Validates a PUT body into canonical fields. @throws PlatformError invalid_field naming the field */
export function parseProfileBody(body: Record<string, unknown>): ProfileFields {
  for (const k of Object.keys(body)) {
    if (!(FIELDS as readonly string[]).includes(k) && body[k] !== null && body[k] !== undefined) {
      throw invalidField(k, `unknown field; a profile has ${FIELDS.join(', ')}`);
    }
  }
  const out: ProfileFields = {};
  const email = optionalString(body, 'email');
  if (email !== undefined) {
    const c = canonicalEmail(email);
    if (!c) throw invalidField('email', 'must be an email address, local@domain.tld');
    out.email = c;
  }
  const phone = optionalString(body, 'phone');
  if (phone !== undefined) {
    if (!isE164(phone)) throw invalidField('phone', 'must be an E.164 number: + and 2 to 15 digits, e.g. +14155550123');
    out.phone = phone;
  }
  const locale = optionalString(body, 'locale');
  if (locale !== undefined) {
    const c = canonicalLocale(locale);
    if (!c) throw invalidField('locale', 'must be a locale: xx or xx_YY, e.g. en or fr_CA');
    out.locale = c;
  }
  const timezone = optionalString(body, 'timezone');
  if (timezone !== undefined) {
    const c = canonicalTimeZone(timezone);
    if (!c) throw invalidField('timezone', 'must be an IANA time zone, e.g. Europe/Paris');
    out.timezone = c;
  }
  if (body['tags'] !== undefined && body['tags'] !== null) {
    const tags = parseTags(body['tags'], 'tags');
    if (tags.length > 0) out.tags = tags;
  }
  return out;
}
