/**
 * The password policy of `POST /auth/signup` (NIST SP 800-63B style): length is what counts, so
 * 12 to 256 characters (Unicode code points), any characters, no composition rules. The upper
 * bound keeps argon2 from being handed megabytes; 256 is room for any passphrase or generated
 * secret. Checked before hashing, so a refused password costs nothing.
 */
import { invalidField } from '../../shared/errors.js';

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

/** Throws `invalid_field` (field `password`) unless the password meets the policy. */
export function checkPassword(password: unknown): string {
  if (typeof password !== 'string') throw invalidField('password', 'must be a string');
  const length = [...password].length;
  if (length < PASSWORD_MIN_LENGTH || length > PASSWORD_MAX_LENGTH) {
    throw invalidField('password', `must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters`);
  }
  return password;
}
