/**
 * The console as an OAuth 2.0 / OpenID Connect client of identity (RFC 6749 §4.1, RFC 7636,
 * OIDC Core §3.1): the authorization code flow with PKCE (S256), `state` against forged
 * callbacks, `nonce` against a replayed ID token, the client authenticated on the back channel
 * with `client_secret_basic`, and refresh-token rotation.
 *
 * The ID token is verified against identity's JWKS (signature, `iss` = JWT_ISSUER, `aud` = our
 * client id, expiry, `nonce`). The access token is opaque to the console: it is only forwarded to
 * the services, which verify it themselves.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import type { Clock } from '../../shared/clock.js';
import type { Operator } from '../page.js';
import type { Tokens } from './sessions.js';

export interface OidcSettings {
  clientId: string;
  clientSecret: string;
  /** identity as the console reaches it (token endpoint, JWKS). */
  identityUrl: string;
  /** identity as browsers reach it (the authorization endpoint). */
  identityPublicUrl: string;
  issuer: string;
  redirectUri: string;
  scope: string;
  timeoutMs: number;
  clock: Clock;
}

/** A sign-in identity refused or that could not be completed; shown to the operator as it is. */
export class SignInError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'SignInError';
  }
}

export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

/** PKCE S256 (RFC 7636 §4.2). */
export function codeChallenge(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

export interface Oidc {
  authorizationUrl(p: { state: string; nonce: string; codeVerifier: string }): string;
  /** Redeems a code; the operator from the verified ID token, and the tokens. */
  redeem(code: string, codeVerifier: string, nonce: string): Promise<{ operator: Operator; tokens: Tokens }>;
  /** A new access token (and rotated refresh token) for a session. */
  refresh(refreshToken: string): Promise<Tokens>;
}

export function createOidc(s: OidcSettings): Oidc {
  const jwks = createRemoteJWKSet(new URL(`${s.identityUrl}/.well-known/jwks.json`), { timeoutDuration: s.timeoutMs });
  const basic = 'Basic ' + Buffer.from(`${encodeURIComponent(s.clientId)}:${encodeURIComponent(s.clientSecret)}`).toString('base64');

  async function tokenRequest(form: Record<string, string>): Promise<Record<string, unknown>> {
    let res: Response;
    try {
      res = await fetch(`${s.identityUrl}/token`, {
        method: 'POST',
        headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams(form).toString(),
        signal: AbortSignal.timeout(s.timeoutMs),
      });
    } catch {
      throw new SignInError('identity_unavailable', 'The identity service could not be reached. Try again in a moment.');
    }
    const text = await res.text();
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // below
    }
    if (!res.ok) {
      const error = typeof body.error === 'string' ? body.error : `http_${res.status}`;
      const desc = typeof body.error_description === 'string' ? body.error_description : 'the token request was refused';
      throw new SignInError(error, `identity refused the sign-in: ${desc} (${error})`);
    }
    return body;
  }

  function tokensOf(body: Record<string, unknown>, previousRefresh?: string): Tokens {
    if (typeof body.access_token !== 'string') throw new SignInError('invalid_response', 'identity answered without an access token');
    const expiresIn = typeof body.expires_in === 'number' ? body.expires_in : 300;
    const refresh = typeof body.refresh_token === 'string' ? body.refresh_token : previousRefresh;
    return {
      accessToken: body.access_token,
      accessExpiresAt: s.clock.now() + expiresIn * 1000,
      ...(refresh === undefined ? {} : { refreshToken: refresh }),
      ...(typeof body.id_token === 'string' ? { idToken: body.id_token } : {}),
    };
  }

  return {
    authorizationUrl({ state, nonce, codeVerifier }) {
      const u = new URL(`${s.identityPublicUrl}/authorize`);
      u.search = new URLSearchParams({
        response_type: 'code',
        client_id: s.clientId,
        redirect_uri: s.redirectUri,
        scope: s.scope,
        state,
        nonce,
        code_challenge: codeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      }).toString();
      return u.toString();
    },

    async redeem(code, codeVerifier, nonce) {
      const body = await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: s.redirectUri, code_verifier: codeVerifier });
      const tokens = tokensOf(body);
      if (!tokens.idToken) throw new SignInError('invalid_response', 'identity answered without an ID token (is openid in the scope?)');
      let claims: JWTPayload;
      try {
        ({ payload: claims } = await jwtVerify(tokens.idToken, jwks, {
          issuer: s.issuer,
          audience: s.clientId,
          clockTolerance: 60,
          currentDate: new Date(s.clock.now()),
        }));
      } catch (err) {
        throw new SignInError(
          'invalid_id_token',
          `the ID token from identity did not verify: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
      if (claims.nonce !== nonce) throw new SignInError('invalid_id_token', 'the ID token does not carry this sign-in’s nonce');
      if (typeof claims.sub !== 'string') throw new SignInError('invalid_id_token', 'the ID token names no user');
      const operator: Operator = {
        userId: claims.sub,
        role: typeof claims.role === 'string' ? claims.role : '',
        ...(typeof claims.email === 'string' ? { email: claims.email } : {}),
        ...(typeof claims.name === 'string' ? { name: claims.name } : {}),
      };
      return { operator, tokens };
    },

    async refresh(refreshToken) {
      return tokensOf(await tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken }), refreshToken);
    },
  };
}
