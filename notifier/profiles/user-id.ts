/** The `{user_id}` of `/api/v1/users/{user_id}/...`: 1–256 visible ASCII characters, no spaces. */
import { invalidField } from '../../shared/errors.js';

export const USER_ID_MAX_LENGTH = 256;
const USER_ID_RE = /^[\x21-\x7e]+$/;

/** The user id from a (URL-decoded) path parameter. @throws PlatformError invalid_field `user_id` */
export function parseUserId(raw: string): string {
  if (raw.length === 0 || raw.length > USER_ID_MAX_LENGTH || !USER_ID_RE.test(raw)) {
    throw invalidField('user_id', `must be 1 to ${USER_ID_MAX_LENGTH} visible ASCII characters`);
  }
  return raw;
}
