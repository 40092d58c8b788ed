/**
 * The sandbox's Google OAuth 2.0 token endpoint, `POST /token` (Google's is
 * `https://oauth2.googleapis.com/token`): form `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`
 * and `assertion=<JWT>`. With a service account configured (FCM_SERVICE_ACCOUNT_FILE, the same
 * key file the notifier reads) the assertion must be signed RS256 by that key, issued by its
 * `client_email`, addressed to a `…/token` URL, carry the `firebase.messaging` scope and live at
 * most one hour; then `{access_token, expires_in: 3599, token_type: "Bearer"}`, and the FCM
 * endpoint takes that token (and only minted ones) until it expires. Refusals are Google's shape:
 * `400 {error: "invalid_grant" | "unsupported_grant_type" | "invalid_scope", error_description}`.
 * Without a service account the endpoint answers `400 invalid_client`.
 */
import { errors as joseErrors, jwtVerify } from 'jose';
import type { EdgeOptions, Reply, RequestContext } from '../shared/http.js';
import { FCM_SCOPE, JWT_BEARER_GRANT } from '../shared/service-account.js';
import { route } from '../shared/http.js';
import type { TemplatedApp } from '../shared/uws.js';
import type { SandboxCore } from './core.js';

const TOKEN_LIFETIME_S = 3599;

const refuse = (error: string, description: string): Reply => ({ status: 400, body: { error, error_description: description } });

export function googleOAuthRoutes(app: TemplatedApp, edge: EdgeOptions, core: SandboxCore): void {
  route(
    app,
    'post',
    '/token',
    async (ctx) => {
      const reply = await exchange(core, ctx);
      core.count('push', 'oauth', reply.status === 200 ? 'accepted' : 'rejected');
      return reply;
    },
    edge,
  );
}

async function exchange(core: SandboxCore, ctx: RequestContext): Promise<Reply> {
  const account = core.credentials.fcmServiceAccount;
  const form = new URLSearchParams(ctx.body.toString('utf8'));
  if (form.get('grant_type') !== JWT_BEARER_GRANT) return refuse('unsupported_grant_type', 'Invalid grant_type');
  if (!account) return refuse('invalid_client', 'The sandbox has no service account (FCM_SERVICE_ACCOUNT_FILE)');
  const assertion = form.get('assertion') ?? '';
  let claims;
  try {
    ({ payload: claims } = await jwtVerify(assertion, account.publicKey, {
      algorithms: ['RS256'],
      issuer: account.clientEmail,
      currentDate: new Date(core.clock.now()),
      requiredClaims: ['iat', 'exp', 'aud', 'scope'],
      clockTolerance: 60,
    }));
  } catch (err) {
    if (err instanceof joseErrors.JWSSignatureVerificationFailed) return refuse('invalid_grant', 'Invalid JWT Signature.');
    if (err instanceof joseErrors.JWTExpired)
      return refuse('invalid_grant', 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.');
    return refuse('invalid_grant', `Invalid JWT: ${err instanceof Error ? err.message : 'unreadable'}`);
  }
  const aud = [claims.aud ?? []].flat();
  if (!aud.some((a) => /\/token$/.test(a))) return refuse('invalid_grant', 'Invalid JWT: the audience is not a token endpoint.');
  if (claims.exp! - claims.iat! > 3600) return refuse('invalid_grant', 'Invalid JWT: Token must be a short-lived token (60 minutes).');
  const scopes = typeof claims['scope'] === 'string' ? claims['scope'].split(' ') : [];
  if (!scopes.includes(FCM_SCOPE)) return refuse('invalid_scope', `The assertion does not ask for ${FCM_SCOPE}.`);
  const token = core.newId('ya29.sandbox-');
  const now = core.clock.now();
  core.mintedTokens.add(token, now + TOKEN_LIFETIME_S * 1000, now);
  return { status: 200, body: { access_token: token, expires_in: TOKEN_LIFETIME_S, token_type: 'Bearer' } };
}
