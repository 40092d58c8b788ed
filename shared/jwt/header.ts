/**
 * The JWS protected header of an access token, checked before any key is looked up.
 *
 * Only what a verifier needs survives: `alg` (compared later against the key's pinned algorithm),
 * `kid` (an opaque lookup key) and `typ` (which must say access token). Every header member that
 * would let the token choose its own key or change how it is processed is refused.
 */
import { TokenError } from './errors.js';
import { isAcceptableKid, type PinnedAlg } from './keys.js';

export interface AccessTokenHeader {
  alg: PinnedAlg;
  kid: string;
}

/**
 * Members that point the verifier at key material chosen by the token (`jwk`, `jku`, `x5u`, `x5c`)
 * or change processing rules (`crit`, `b64`, `zip`). We trust only the published key set, so any
 * of them, whatever its value, refuses the token.
 */
const FORBIDDEN_MEMBERS = ['jwk', 'jku', 'x5u', 'x5c', 'crit', 'b64', 'zip'] as const;

/** RFC 9068 §2.1: `at+jwt`; RFC 8725 §3.11 allows the `application/` prefix; media types ignore case. */
function isAccessTokenType(typ: unknown): boolean {
  if (typeof typ !== 'string') return false;
  const t = typ.toLowerCase();
  return t === 'at+jwt' || t === 'application/at+jwt';
}

/** Parses a base64url JSON object (header or payload); undefined when it is not one. */
export function decodeJsonObject(segment: string): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** Parses and checks the protected header segment. Throws `TokenError`. */
export function parseAccessTokenHeader(segment: string): AccessTokenHeader {
  const h = decodeJsonObject(segment);
  if (!h) throw new TokenError('header_malformed', 'token header is not a JSON object');
  const alg = h.alg;
  if (typeof alg !== 'string' || alg.length === 0) throw new TokenError('header_malformed', 'token header has no algorithm');
  // `none` in any spelling, every HMAC and anything else we do not pin a key to.
  if (alg !== 'ES256' && alg !== 'RS256') throw new TokenError('alg_not_allowed', 'token algorithm is not accepted');
  for (const m of FORBIDDEN_MEMBERS) {
    if (Object.hasOwn(h, m)) {
      if (m === 'crit') throw new TokenError('crit_unsupported', 'token header declares critical extensions, which are not supported');
      throw new TokenError('forbidden_header', `token header carries a forbidden parameter (${m})`);
    }
  }
  if (!isAccessTokenType(h.typ)) throw new TokenError('typ_not_access_token', 'token is not an access token (typ must be at+jwt)');
  if (!isAcceptableKid(h.kid)) throw new TokenError('kid_invalid', 'token key id (kid) is missing or malformed');
  return { alg, kid: h.kid };
}
