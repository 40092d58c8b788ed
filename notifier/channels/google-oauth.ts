/**
 * OAuth 2.0 access tokens for FCM HTTP v1 from a service-account key: a JWT assertion signed
 * RS256 with the key (iss = the account's e-mail, scope = `firebase.messaging`, aud = the token
 * endpoint, one hour) exchanged at the token endpoint with the JWT-bearer grant (RFC 7523).
 *
 * A token is kept until `refreshBeforeMs` before it expires and shared by every send; concurrent
 * sends that find it stale wait for one exchange, not one each. A failed exchange is not cached:
 * the next send tries again. What a failure means for a send:
 * - the endpoint refused the key (`invalid_grant`, `invalid_client`, `unauthorized_client`, any
 *   other 4xx but 408 and 429) → {@link TokenRefused}: every send would fail alike, so the send is
 *   a permanent `provider_auth_failed`, as FCM's own 401 is;
 * - no answer, 408, 429 or 5xx → a plain Error: the send is retried on the schedule.
 */
import { SignJWT } from 'jose';
import { request } from 'undici';
import type { Clock } from '../../shared/clock.js';
import { InternalError } from '../../shared/errors.js';
import { FCM_SCOPE, JWT_BEARER_GRANT, type ServiceAccountKey } from '../../shared/service-account.js';

/** Google accepts assertions of at most one hour. */
const ASSERTION_LIFETIME_S = 3600;

export interface TokenSourceOptions {
  key: ServiceAccountKey;
  /** Overrides the key file's `token_uri` (e.g. the sandbox). */
  tokenUri?: string;
  scope?: string;
  clock: Clock;
  /** Deadline of one exchange, ms. */
  timeoutMs: number;
  /** Exchange again this long before the token expires, ms (default 5 minutes). */
  refreshBeforeMs?: number;
}

/**
 * The token endpoint turned the key down (`provider_token_refused`): a configuration problem, not a
 * passing one. The message quotes the provider's answer, so it is for the log and the dead-letter
 * reason, never an HTTP caller.
 */
export class TokenRefused extends InternalError<'provider_token_refused'> {
  constructor(message: string) {
    super('provider_token_refused', message);
    this.name = 'TokenRefused';
  }
}

export function isTokenRefused(err: unknown): err is TokenRefused {
  return err instanceof TokenRefused;
}

/** A current access token on each call, minted when needed (see push-fcm.ts's TokenSource). */
export function serviceAccountTokens(
  opts: TokenSourceOptions,
): (() => Promise<string>) & { invalidate: (token: string) => void; ageMs: (token: string) => number | undefined } {
  const tokenUri = opts.tokenUri ?? opts.key.tokenUri;
  const refreshBeforeMs = opts.refreshBeforeMs ?? 5 * 60_000;
  let current: { token: string; mintedAt: number; refreshAt: number } | undefined;
  let inFlight: Promise<string> | undefined;

  const exchange = async (): Promise<string> => {
    const now = opts.clock.now();
    const iat = Math.floor(now / 1000);
    const header: { alg: 'RS256'; typ: 'JWT'; kid?: string } = { alg: 'RS256', typ: 'JWT' };
    if (opts.key.keyId) header.kid = opts.key.keyId;
    const assertion = await new SignJWT({ scope: opts.scope ?? FCM_SCOPE })
      .setProtectedHeader(header)
      .setIssuer(opts.key.clientEmail)
      .setAudience(tokenUri)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ASSERTION_LIFETIME_S)
      .sign(opts.key.privateKey);
    const res = await request(tokenUri, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    const text = await res.body.text();
    let body: { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown } = {};
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      // Not JSON: judged by the status alone.
    }
    if (res.statusCode !== 200) {
      const why = `token endpoint answered ${res.statusCode}${typeof body.error === 'string' ? ` ${body.error}` : ''}${typeof body.error_description === 'string' ? `: ${body.error_description}` : ''}`;
      if (res.statusCode >= 400 && res.statusCode < 500 && res.statusCode !== 408 && res.statusCode !== 429) throw new TokenRefused(why);
      throw new Error(why);
    }
    if (typeof body.access_token !== 'string' || body.access_token === '')
      throw new Error('token endpoint answered without an access_token');
    const lifetimeMs = (typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : ASSERTION_LIFETIME_S) * 1000;
    // A token shorter-lived than the refresh margin is used for half its life.
    current = { token: body.access_token, mintedAt: now, refreshAt: now + Math.max(lifetimeMs / 2, lifetimeMs - refreshBeforeMs) };
    return body.access_token;
  };

  const get = async (): Promise<string> => {
    if (current && opts.clock.now() < current.refreshAt) return current.token;
    inFlight ??= exchange().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  };
  return Object.assign(get, {
    // Only that token: a send that started with an older one must not drop a newer one.
    invalidate: (token: string) => {
      if (current?.token === token) current = undefined;
    },
    ageMs: (token: string) => (current?.token === token ? opts.clock.now() - current.mintedAt : undefined),
  });
}
