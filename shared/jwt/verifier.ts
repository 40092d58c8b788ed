/**
 * The resource-server access-token verifier, shared by the sidecar (every bearer request) and the
 * identity service (userinfo, orders, introspection).
 *
 * Order of checks, cheapest and least trusting first: size and compact form; the protected header
 * (algorithm family, forbidden members, `typ`, `kid`); the key by kid, refetching the key set on an
 * unknown kid (single flight, once per cooldown); the header `alg` against the key's pinned
 * algorithm; the signature; only then the claims. Nothing in a token is looked at as a claim until
 * its signature holds. Last, with a revocation list (revocation-list.ts), the token's `jti` and
 * family (`sid`) are looked up in it: on every verification, cached tokens included.
 *
 * Why the signature is checked with `node:crypto` and not jose's `compactVerify`: jose 6 verifies
 * through WebCrypto, one thread-pool round trip per call, about 7,000 ES256 verifications/s per
 * core on our machines; a one-shot `crypto.verify` on a cached `KeyObject` does about twice that,
 * and the sidecar calls this on every request. The checks that make a verifier safe (the algorithm
 * pinned per key, the refused header members, the claim rules) are ours either way; jose imports
 * and validates the keys (keys.ts), and the tests check that jose agrees with every token we accept.
 *
 * A bounded LRU of verified tokens (keyed by the exact token string) skips the signature for a
 * token seen before. An entry is used only while the token is unexpired (same rule and tolerance
 * as a full check) and while the kid still maps to the very key object that verified it, so a key
 * retired or replaced by a JWKS refresh invalidates its cached tokens at once.
 */
import { LRUCache } from 'lru-cache';
import { PlatformError } from '../errors.js';
import type { Logger } from '../log.js';
import { validateAccessClaims, type AccessClaims, type ClaimExpectations } from './claims.js';
import { TokenError } from './errors.js';
import { decodeJsonObject, parseAccessTokenHeader } from './header.js';
import { KeySet, type KeySetStats } from './key-set.js';
import { verifyWithPinnedKey, type JwksDocument, type PinnedKey } from './keys.js';
import { RevocationList, type RevocationListStats } from './revocation-list.js';

// The verifier's whole public surface is importable from this module (or from ./index.js).
export { quotaSubjectOf, type AccessClaims } from './claims.js';
export { TokenError, isTokenError, type TokenRejectReason } from './errors.js';
export type { JwksDocument, PinnedAlg } from './keys.js';

export interface VerifierOptions {
  /** The exact `iss` the tokens must carry. */
  issuer: string;
  /** This resource server's identifier; `aud` must equal it (or be an array containing it). */
  audience: string;
  /** Where to fetch the JWKS (identity's `/.well-known/jwks.json`). Exactly one of `jwksUrl` and `keys`. */
  jwksUrl?: string | URL;
  /** A static JWKS, for tests and standalone deployments. Never refetched. */
  keys?: JwksDocument;
  /**
   * Clock skew allowed on exp, nbf and iat, in seconds. Default 60 (JWT_CLOCK_SKEW's default);
   * 0–300 accepted.
   */
  clockToleranceSec?: number;
  /** An unknown kid triggers at most one JWKS fetch per this window. Default 30 s. */
  jwksCooldownMs?: number;
  /**
   * The key set is refreshed (in the background) once older than this. Default 10 min (within
   * identity's JWKS max-age, 15 min).
   */
  jwksMaxAgeMs?: number;
  /**
   * A remote key set is refetched this often on a timer, conditionally (If-None-Match; a 304 keeps
   * it), so a key removed from the JWKS stops verifying within one interval plus one fetch.
   * 0 turns the timer off. Default 5 s.
   */
  jwksRefreshIntervalMs?: number;
  /** Deadline for one JWKS (or revocation list) fetch. Default 5 s. */
  fetchTimeoutMs?: number;
  /**
   * The issuer's revocation list (identity's `/.well-known/revoked-tokens.json`): a token whose
   * `jti` or family (`sid`) it names is refused (`revoked`) although its signature holds. Fetched
   * at once and then every `revocationRefreshIntervalMs`, conditionally (revocation-list.ts).
   * Undefined: no list, revoked tokens pass until they expire.
   */
  revocationListUrl?: string | URL;
  /** Background refresh period of the revocation list. Default 2 s. */
  revocationRefreshIntervalMs?: number;
  /** Verified tokens remembered (bounded LRU); 0 turns the cache off. Default 10,000. */
  tokenCacheSize?: number;
  /** Tokens longer than this (characters) are refused unread. Default 8192. */
  maxTokenLength?: number;
  /** Injected clock, epoch milliseconds. Default `Date`. */
  clock?: { now(): number };
  log?: Logger;
}

/** The key a DPoP proof for this request was made with (shared/dpop `CheckedProof.jkt`). */
export interface TokenBinding {
  readonly jkt: string;
}

/** The DPoP binding rule (RFC 9449 §7.1): see `Verifier.verifyAccessToken`. Throws `TokenError`. */
export function checkBinding(claims: AccessClaims, binding: TokenBinding | 'any' | undefined): AccessClaims {
  if (binding === 'any') return claims;
  if (binding === undefined) {
    if (claims.jkt !== undefined)
      throw new TokenError('dpop_bound_as_bearer', 'this access token is DPoP-bound; send it as Authorization: DPoP with a DPoP proof');
    return claims;
  }
  if (claims.jkt === undefined)
    throw new TokenError('dpop_not_bound', 'this access token is not DPoP-bound; send it as Authorization: Bearer');
  if (claims.jkt !== binding.jkt)
    throw new TokenError('dpop_key_mismatch', 'the DPoP proof was made with another key than the one this token is bound to');
  return claims;
}

export interface VerifierStats extends KeySetStats {
  cachedTokens: number;
  /** The revocation list's state, when the verifier has one. */
  revocations: RevocationListStats | undefined;
}

export interface Verifier {
  /**
   * Verifies a compact JWS access token. Resolves its claims, or rejects with a `TokenError`.
   *
   * Without `binding` the token is a bearer token, and one that is DPoP-bound (`cnf.jkt`) is
   * refused (`dpop_bound_as_bearer`): so every resource server refuses a bound token sent as
   * Bearer. With `binding` (the thumbprint of a DPoP proof already checked for this request) the
   * token must be bound to exactly that key (`dpop_not_bound`, `dpop_key_mismatch`). `'any'`
   * skips the rule: for introspection, which reports the binding instead of enforcing it.
   */
  verifyAccessToken(token: string, binding?: TokenBinding | 'any'): Promise<AccessClaims>;
  /** Resolves once a key set is loaded; rejects if the first load failed (retry by calling again). */
  ready(): Promise<void>;
  /** Counters and state for health checks and tests. */
  stats(): VerifierStats;
  /** Stops the key-set refresh timer, aborts a fetch in flight and refuses further verifications. */
  close(): void;
}

export const VERIFIER_DEFAULTS = Object.freeze({
  clockToleranceSec: 60,
  jwksCooldownMs: 30_000,
  jwksMaxAgeMs: 10 * 60_000,
  jwksRefreshIntervalMs: 5_000,
  fetchTimeoutMs: 5_000,
  revocationRefreshIntervalMs: 2_000,
  tokenCacheSize: 10_000,
  maxTokenLength: 8192,
});

/** Total characters of cached tokens, so the cache stays a few MiB whatever the token sizes. */
const TOKEN_CACHE_MAX_CHARS = 8 * 1024 * 1024;
/** Three non-empty base64url segments, nothing else: no padding, no whitespace, no JSON serialization. */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

interface CacheEntry {
  claims: AccessClaims;
  key: PinnedKey;
  /** Clock time (ms) from which the token counts as expired: (exp + tolerance) × 1000. */
  expiredAtMs: number;
}

function configError(detail: string): PlatformError {
  return new PlatformError('config_invalid', { detail: `jwt verifier: ${detail}` });
}

function numberIn(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  const v = value ?? fallback;
  if (!Number.isFinite(v) || v < min || v > max) throw configError(`${name} must be between ${min} and ${max}, got ${String(value)}`);
  return v;
}

/** Builds a verifier. Throws `PlatformError('config_invalid')` on bad options; starts the first JWKS fetch. */
export function createVerifier(opts: VerifierOptions): Verifier {
  if (typeof opts.issuer !== 'string' || opts.issuer === '') throw configError('issuer is required');
  if (typeof opts.audience !== 'string' || opts.audience === '') throw configError('audience is required');
  if ((opts.jwksUrl === undefined) === (opts.keys === undefined)) throw configError('give exactly one of jwksUrl and keys');
  let jwksUrl: URL | undefined;
  if (opts.jwksUrl !== undefined) {
    try {
      jwksUrl = new URL(opts.jwksUrl);
    } catch {
      throw configError('jwksUrl is not a URL');
    }
    if (jwksUrl.protocol !== 'https:' && jwksUrl.protocol !== 'http:') throw configError('jwksUrl must be http or https');
  }
  const want: ClaimExpectations = {
    issuer: opts.issuer,
    audience: opts.audience,
    clockToleranceSec: numberIn('clockToleranceSec', opts.clockToleranceSec, VERIFIER_DEFAULTS.clockToleranceSec, 0, 300),
  };
  const cooldownMs = numberIn('jwksCooldownMs', opts.jwksCooldownMs, VERIFIER_DEFAULTS.jwksCooldownMs, 0, 24 * 3_600_000);
  const maxAgeMs = numberIn('jwksMaxAgeMs', opts.jwksMaxAgeMs, VERIFIER_DEFAULTS.jwksMaxAgeMs, 1, 7 * 24 * 3_600_000);
  const refreshIntervalMs = numberIn(
    'jwksRefreshIntervalMs',
    opts.jwksRefreshIntervalMs,
    VERIFIER_DEFAULTS.jwksRefreshIntervalMs,
    0,
    24 * 3_600_000,
  );
  const fetchTimeoutMs = numberIn('fetchTimeoutMs', opts.fetchTimeoutMs, VERIFIER_DEFAULTS.fetchTimeoutMs, 1, 120_000);
  const cacheSize = numberIn('tokenCacheSize', opts.tokenCacheSize, VERIFIER_DEFAULTS.tokenCacheSize, 0, 10_000_000);
  const maxTokenLength = numberIn('maxTokenLength', opts.maxTokenLength, VERIFIER_DEFAULTS.maxTokenLength, 64, 1_048_576);
  const clock = opts.clock ?? Date;
  const now = (): number => clock.now();
  let revocationUrl: URL | undefined;
  if (opts.revocationListUrl !== undefined) {
    try {
      revocationUrl = new URL(opts.revocationListUrl);
    } catch {
      throw configError('revocationListUrl is not a URL');
    }
    if (revocationUrl.protocol !== 'https:' && revocationUrl.protocol !== 'http:')
      throw configError('revocationListUrl must be http or https');
  }
  const revocationIntervalMs = numberIn(
    'revocationRefreshIntervalMs',
    opts.revocationRefreshIntervalMs,
    VERIFIER_DEFAULTS.revocationRefreshIntervalMs,
    1,
    24 * 3_600_000,
  );

  const keySet = new KeySet({ jwksUrl, keys: opts.keys, cooldownMs, maxAgeMs, refreshIntervalMs, fetchTimeoutMs, now, log: opts.log });
  const cache =
    cacheSize > 0
      ? new LRUCache<string, CacheEntry>({
          max: cacheSize,
          maxSize: TOKEN_CACHE_MAX_CHARS,
          sizeCalculation: (_v, token) => token.length,
        })
      : undefined;
  const revocations =
    revocationUrl &&
    new RevocationList({
      url: revocationUrl,
      issuer: opts.issuer,
      refreshIntervalMs: revocationIntervalMs,
      fetchTimeoutMs,
      clockToleranceSec: want.clockToleranceSec,
      now,
      log: opts.log,
    });
  let closed = false;

  /** The token's revocation, checked on every verification (cached tokens included). */
  function notRevoked(claims: AccessClaims): AccessClaims {
    if (revocations?.isRevoked(claims.jti, claims.sid)) throw new TokenError('revoked', 'token has been revoked');
    return claims;
  }

  async function keyFor(kid: string): Promise<PinnedKey> {
    const known = keySet.get(kid);
    if (known) return known;
    const found = await keySet.lookupAfterRefresh(kid);
    if (found) return found;
    if (!keySet.hasKeys) throw new TokenError('keys_unavailable', 'signing keys are not available; try again later');
    throw new TokenError('kid_unknown', 'token signing key is unknown');
  }

  function verifyAccessToken(token: string, binding?: TokenBinding | 'any'): Promise<AccessClaims> {
    if (binding === undefined || binding === 'any') return verify(token, binding);
    // Presented under the DPoP scheme: every refusal is answered with a DPoP challenge.
    return verify(token, binding).catch((err: unknown) => {
      throw err instanceof TokenError ? new TokenError(err.reason, err.detail ?? err.message, 'dpop') : err;
    });
  }

  async function verify(token: string, binding: TokenBinding | 'any' | undefined): Promise<AccessClaims> {
    if (closed) throw new TokenError('verifier_closed', 'token verification is shut down');
    // Once, at start: the first revocation list (or its failure) before the first verdict.
    if (revocations && !revocations.settled) await revocations.first;
    const nowMs = now();
    keySet.refreshIfStale(nowMs);
    if (typeof token !== 'string' || token.length === 0) throw new TokenError('malformed', 'token is missing');
    if (token.length > maxTokenLength) throw new TokenError('too_large', 'token is too large');

    const hit = cache?.get(token);
    if (hit) {
      if (nowMs < hit.expiredAtMs && keySet.get(hit.key.kid) === hit.key) return checkBinding(notRevoked(hit.claims), binding);
      cache!.delete(token); // expired or its key is gone: the full check below says which
    }

    if (!COMPACT_JWS.test(token)) throw new TokenError('malformed', 'token is not a compact JWS');
    const dot1 = token.indexOf('.');
    const dot2 = token.indexOf('.', dot1 + 1);
    const header = parseAccessTokenHeader(token.slice(0, dot1));
    const key = await keyFor(header.kid);
    if (header.alg !== key.alg) throw new TokenError('alg_mismatch', 'token algorithm does not match its signing key');
    const signingInput = Buffer.from(token.slice(0, dot2), 'latin1');
    const signature = Buffer.from(token.slice(dot2 + 1), 'base64url');
    if (!verifyWithPinnedKey(key, signingInput, signature)) throw new TokenError('signature_invalid', 'token signature is invalid');

    const payload = decodeJsonObject(token.slice(dot1 + 1, dot2));
    if (!payload) throw new TokenError('malformed', 'token payload is not a JSON object');
    // The time is read again: a refetch may have been awaited since the first reading.
    const claims = validateAccessClaims(payload, want, now());
    cache?.set(token, { claims, key, expiredAtMs: (claims.exp + want.clockToleranceSec) * 1000 });
    return checkBinding(notRevoked(claims), binding);
  }

  return {
    verifyAccessToken,
    async ready() {
      if (closed) throw new TokenError('verifier_closed', 'token verification is shut down');
      await keySet.ready();
    },
    stats() {
      return { ...keySet.stats(), cachedTokens: cache?.size ?? 0, revocations: revocations?.stats() };
    },
    close() {
      closed = true;
      keySet.close();
      revocations?.close();
      cache?.clear();
    },
  };
}
