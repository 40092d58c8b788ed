/**
 * The password check of the sign-in page and the device page, behind the same throttle as
 * `POST /auth/login` (identity/accounts/login-throttle.ts): the same `login_failures` counters,
 * per account (the SHA-256 of the normalised email, known or not) and per client address, with
 * the same limits (`IDENTITY_LOGIN_*`). A failure on any of the three surfaces counts on all of
 * them, and a throttled account or address is refused before its password is looked at.
 *
 * The answer does not depend on whether the account exists: the throttle is keyed by the typed
 * email, and an unknown email is checked against a dummy hash at the cost of a real one
 * (credentials.ts).
 */
import type { RequestContext } from '../../shared/http.js';
import { sidecarTrust } from '../../shared/sidecar-trust.js';
import { accountKey, LoginThrottle } from '../accounts/login-throttle.js';
import type { OAuthRuntime } from './runtime.js';

export type PasswordCheck =
  | { readonly ok: true; readonly userId: string }
  | { readonly ok: false; readonly reason: 'wrong' }
  | { readonly ok: false; readonly reason: 'throttled'; readonly retryAfterS: number };

export type PasswordChecker = (
  ctx: Pick<RequestContext, 'headers' | 'remoteAddress'>,
  email: string,
  password: string,
) => Promise<PasswordCheck>;

export function passwordChecker(rt: OAuthRuntime): PasswordChecker {
  const limits = rt.settings.loginThrottle;
  const throttle = new LoginThrottle(rt.pool, limits, rt.clock);
  // The client address: the sidecar's X-Subject-Address when it vouches for the request, else the peer.
  const sidecar = sidecarTrust(rt.settings.serviceSecret);
  let lastPurgeMs = rt.clock.now();
  return async (ctx, email, password) => {
    const keys = { account: accountKey(email), ip: sidecar.clientAddress(ctx) };
    const waitMs = await throttle.blockedForMs(keys);
    if (waitMs > 0) return { ok: false, reason: 'throttled', retryAfterS: Math.ceil(waitMs / 1000) };
    const userId = await rt.users.verifyPassword(email, password);
    if (userId === undefined) {
      await throttle.failed(keys);
      const now = rt.clock.now();
      if (now - lastPurgeMs >= limits.windowMs) {
        lastPurgeMs = now;
        void throttle.purge().catch((err: unknown) => rt.log.warn({ err }, 'oauth: purging closed login windows failed'));
      }
      return { ok: false, reason: 'wrong' };
    }
    await throttle.succeeded(keys);
    return { ok: true, userId };
  };
}

/** The page's words for a refused sign-in. */
export function throttledMessage(retryAfterS: number): string {
  const minutes = Math.ceil(retryAfterS / 60);
  return `Too many failed sign-ins. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`;
}
