/**
 * A push device registration, `POST /api/v1/users/{user_id}/devices` with `{token, platform}`:
 * - `token`: the provider's registration token (FCM for android and web, APNs via FCM for ios),
 *   1–4096 visible ASCII characters; it travels in the DELETE path, URL-encoded;
 * - `platform`: `ios`, `android` or `web`.
 *
 * A token identifies one app install, so it belongs to one user at a time: registering it for
 * another user (someone else signed in on that device) moves it. A user keeps at most
 * {@link MAX_DEVICES_PER_USER} tokens; registering one more drops the one registered (or
 * refreshed) longest ago, which is the likeliest to be stale.
 */
import { invalidField } from '../../shared/errors.js';

export const PLATFORMS = ['ios', 'android', 'web'] as const;
export type Platform = (typeof PLATFORMS)[number];

export const TOKEN_MAX_LENGTH = 4096;
export const MAX_DEVICES_PER_USER = 20;
const TOKEN_RE = /^[\x21-\x7e]+$/;

export interface Registration {
  token: string;
  platform: Platform;
}

/** @throws PlatformError invalid_field `token` */
export function parseToken(raw: unknown): string {
  if (typeof raw !== 'string') throw invalidField('token', 'must be a string');
  if (raw.length === 0 || raw.length > TOKEN_MAX_LENGTH || !TOKEN_RE.test(raw)) {
    throw invalidField('token', `must be 1 to ${TOKEN_MAX_LENGTH} visible ASCII characters`);
  }
  return raw;
}

/** Validates a registration body. @throws PlatformError invalid_field naming the field */
export function parseRegistration(body: Record<string, unknown>): Registration {
  for (const k of Object.keys(body)) {
    if (k !== 'token' && k !== 'platform' && body[k] !== null && body[k] !== undefined) throw invalidField(k, 'unknown field');
  }
  if (body['token'] === null || body['token'] === undefined) throw invalidField('token', 'is required');
  const token = parseToken(body['token']);
  const platform = body['platform'];
  if (platform === null || platform === undefined) throw invalidField('platform', 'is required');
  if (typeof platform !== 'string' || !(PLATFORMS as readonly string[]).includes(platform)) {
    throw invalidField('platform', `must be one of ${PLATFORMS.join(', ')}`);
  }
  return { token, platform: platform as Platform };
}
