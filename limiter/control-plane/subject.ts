/**
 * Quota subject ids as the control plane accepts them (the forms of proto/quota/v1/quota.proto):
 *
 * - `key:<sha256 hex>`: an API key, only ever stored hashed: exactly 64 lowercase hex digits.
 * - `user:<id>`, `tenant:<id>`: a signed-in user or a tenant; the id is 1+ visible ASCII characters
 *   (no spaces or control characters), as the access token's `sub` / `tenant_id` carries it.
 * - `plan:<name>`: a plan; the name is `[A-Za-z0-9_.-]`, as the sidecar's RateLimit-Policy needs it.
 *
 * Nothing else: the sidecar looks subjects up only in these four forms (its per-address cap is
 * configuration, not a record), so a record under any other id could never apply to anyone and is
 * refused rather than stored. At most 128 characters in all.
 */
import { createHash } from 'node:crypto';
import { invalidField } from '../../shared/errors.js';

export const MAX_SUBJECT_LENGTH = 128;
/** The subject kinds, each the prefix of its ids before the colon (the HTTP list's `subject_kind`). */
export const SUBJECT_KINDS = ['key', 'user', 'tenant', 'plan'] as const;
/** Longest raw API key the internal HTTP API accepts in its path. */
export const MAX_API_KEY_LENGTH = 256;
export const MAX_SIDECAR_ID_LENGTH = 128;

const KEY_RE = /^key:[0-9a-f]{64}$/;
const ID_RE = /^(user|tenant):[\x21-\x7e]+$/;
const PLAN_NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const VISIBLE_RE = /^[\x21-\x7e]+$/;

/** The quota subject of a raw API key: `key:` + lowercase hex SHA-256 of its UTF-8 bytes. */
export function apiKeySubject(rawKey: string): string {
  return `key:${createHash('sha256').update(rawKey, 'utf8').digest('hex')}`;
}

/**
 * Checks a raw API key taken from a path or a flag (before hashing it).
 *
 * @throws PlatformError `invalid_field` naming `field`; the message never repeats the key.
 */
export function checkRawApiKey(rawKey: string, field = 'api_key'): void {
  if (rawKey.length === 0) throw invalidField(field, 'required');
  if (rawKey.length > MAX_API_KEY_LENGTH) throw invalidField(field, `must be at most ${MAX_API_KEY_LENGTH} characters`);
  if (!VISIBLE_RE.test(rawKey)) throw invalidField(field, 'must be visible ASCII characters without spaces');
}

/** True when `name` is a valid plan name (the part after `plan:`). */
export function isPlanName(name: string): boolean {
  return PLAN_NAME_RE.test(name);
}

/** The plan name of a `plan:<name>` subject, else undefined. */
export function planOfSubject(subjectId: string): string | undefined {
  return subjectId.startsWith('plan:') ? subjectId.slice(5) : undefined;
}

/**
 * Checks a subject id against the forms above.
 *
 * @throws PlatformError `invalid_field` naming `field`.
 */
export function checkSubjectId(subjectId: string, field = 'subject_id'): void {
  if (subjectId.length === 0) throw invalidField(field, 'required');
  if (subjectId.length > MAX_SUBJECT_LENGTH) throw invalidField(field, `must be at most ${MAX_SUBJECT_LENGTH} characters`);
  if (subjectId.startsWith('key:')) {
    if (!KEY_RE.test(subjectId)) throw invalidField(field, 'an API key subject is key: and the 64 lowercase hex digits of its SHA-256');
    return;
  }
  const plan = planOfSubject(subjectId);
  if (plan !== undefined) {
    if (!isPlanName(plan)) throw invalidField(field, 'a plan name is 1 to 64 of A-Z a-z 0-9 _ . -');
    return;
  }
  if (!ID_RE.test(subjectId)) {
    throw invalidField(field, 'must be key:<sha256 hex>, user:<id>, tenant:<id> or plan:<name> (ids are visible ASCII, no spaces)');
  }
}

/**
 * Checks a sidecar id (Watch, Snapshot, Ack): 1 to 128 visible ASCII characters.
 *
 * @throws PlatformError `invalid_field` naming `sidecar_id`.
 */
export function checkSidecarId(sidecarId: string): void {
  if (sidecarId.length === 0) throw invalidField('sidecar_id', 'required');
  if (sidecarId.length > MAX_SIDECAR_ID_LENGTH) throw invalidField('sidecar_id', `must be at most ${MAX_SIDECAR_ID_LENGTH} characters`);
  if (!VISIBLE_RE.test(sidecarId)) throw invalidField('sidecar_id', 'must be visible ASCII characters without spaces');
}
