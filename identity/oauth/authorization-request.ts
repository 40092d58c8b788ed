/**
 * Validation of an authorization request (`/authorize`), in the order RFC 6749 §4.1.2.1 requires:
 * first the client and the redirect URI, whose errors are shown to the user and never redirected
 * (redirecting to an unverified URI is an open redirector); then everything else, whose errors go
 * back to the client's redirect URI with `error`, `state` and `iss`.
 *
 * The redirect URI must equal one of the client's registered URIs character for character: no
 * prefix, suffix, path, query or case variant, no normalisation (RFC 9700 §4.1.3).
 */
import type { OAuthClient } from '../clients/client.js';
import type { OAuthErrorCode } from './oauth-error.js';
import { OAuthError } from './oauth-error.js';
import { parseParams } from './params.js';
import { isValidCodeChallenge } from './pkce.js';
import { grantScopes, parseScope } from './scopes.js';

export interface AuthorizationRequest {
  readonly client: OAuthClient;
  readonly redirectUri: string;
  readonly state: string | undefined;
  readonly scopes: readonly string[];
  readonly codeChallenge: string;
  readonly nonce: string | undefined;
  /** The validated OAuth parameters, to carry through the sign-in form. */
  readonly params: ReadonlyMap<string, string>;
}

export type AuthorizationValidation =
  | { readonly ok: true; readonly request: AuthorizationRequest }
  /** Not redirectable: the client or its redirect URI is not established. */
  | { readonly ok: false; readonly redirect: false; readonly field: 'client_id' | 'redirect_uri'; readonly detail: string }
  | {
      readonly ok: false;
      readonly redirect: true;
      readonly redirectUri: string;
      readonly state: string | undefined;
      readonly error: OAuthErrorCode;
      readonly description: string;
    };

/** The OAuth parameters of an authorization request; anything else in a form is not carried. */
export const AUTHORIZATION_PARAMS = [
  'response_type',
  'client_id',
  'redirect_uri',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
  'nonce',
  'prompt',
  'response_mode',
] as const;

const MAX_STATE = 2048;
const MAX_NONCE = 512;

/**
 * Validates the request's parameters (a query string or a form body as urlencoded text). `lookup`
 * finds a client by id.
 */
export async function validateAuthorizationRequest(
  text: string,
  lookup: (clientId: string) => Promise<OAuthClient | undefined>,
): Promise<AuthorizationValidation> {
  const all = new URLSearchParams(text);
  const ids = all.getAll('client_id').filter((v) => v !== '');
  if (ids.length !== 1) return { ok: false, redirect: false, field: 'client_id', detail: 'client_id: is required, once' };
  const clientId = ids[0]!;
  const client = clientId.length <= 128 ? await lookup(clientId) : undefined;
  if (!client) return { ok: false, redirect: false, field: 'client_id', detail: 'client_id: is not a registered client' };
  const uris = all.getAll('redirect_uri').filter((v) => v !== '');
  if (uris.length !== 1) return { ok: false, redirect: false, field: 'redirect_uri', detail: 'redirect_uri: is required, once' };
  const redirectUri = uris[0]!;
  if (!client.redirectUris.includes(redirectUri)) {
    return {
      ok: false,
      redirect: false,
      field: 'redirect_uri',
      detail: 'redirect_uri: is not registered for this client (it must match a registered URI exactly)',
    };
  }

  const states = all.getAll('state');
  const state = states.length === 1 && states[0]!.length <= MAX_STATE ? states[0] : undefined;
  const fail = (error: OAuthErrorCode, description: string): AuthorizationValidation => ({
    ok: false,
    redirect: true,
    redirectUri,
    state,
    error,
    description,
  });

  let p: ReadonlyMap<string, string>;
  try {
    p = parseParams(text);
  } catch (err) {
    return fail('invalid_request', err instanceof OAuthError ? err.description : 'the request is malformed');
  }
  if (states.length > 1) return fail('invalid_request', 'parameter state is given more than once');
  if ((p.get('state')?.length ?? 0) > MAX_STATE) return fail('invalid_request', 'state is too long');

  const responseType = p.get('response_type');
  if (responseType === undefined) return fail('invalid_request', 'parameter response_type is required');
  // Only the code flow: implicit (`token`) and hybrid (`code id_token`, ...) responses put tokens in
  // the browser's URL (RFC 9700 §2.1.2).
  if (responseType !== 'code') return fail('unsupported_response_type', 'only response_type=code is supported');
  if (!client.grantTypes.includes('authorization_code')) {
    return fail('unauthorized_client', 'this client may not use the authorization code grant');
  }
  const mode = p.get('response_mode');
  if (mode !== undefined && mode !== 'query') return fail('invalid_request', 'only response_mode=query is supported');
  if (p.has('request') || p.has('request_uri')) return fail('invalid_request', 'request objects are not supported');

  const method = p.get('code_challenge_method');
  const challenge = p.get('code_challenge');
  if (challenge === undefined) return fail('invalid_request', 'PKCE is required: code_challenge is missing');
  if (method !== 'S256') return fail('invalid_request', 'PKCE is required with code_challenge_method=S256 (plain is not accepted)');
  if (!isValidCodeChallenge(challenge)) return fail('invalid_request', 'code_challenge is not an S256 challenge (43 base64url characters)');

  let scopes: string[];
  try {
    scopes = grantScopes(parseScope(p.get('scope')), client.scopes);
  } catch (err) {
    return fail('invalid_scope', err instanceof OAuthError ? err.description : 'scope is invalid');
  }

  const nonce = p.get('nonce');
  if (nonce !== undefined && nonce.length > MAX_NONCE) return fail('invalid_request', 'nonce is too long');
  // There are no sign-in sessions to reuse: every authorization signs in.
  if ((p.get('prompt') ?? '').split(' ').includes('none')) return fail('login_required', 'the user must sign in');

  const params = new Map<string, string>();
  for (const name of AUTHORIZATION_PARAMS) {
    const v = p.get(name);
    if (v !== undefined) params.set(name, v);
  }
  return { ok: true, request: { client, redirectUri, state: p.get('state'), scopes, codeChallenge: challenge, nonce, params } };
}

/** The redirect back to the client: its exact URI plus our parameters (and the RFC 9207 `iss`). */
export function redirectTo(redirectUri: string, params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.append(k, v);
  // Appended to the registered string as it is (never re-serialised), keeping any query it has.
  return `${redirectUri}${redirectUri.includes('?') ? '&' : '?'}${q.toString()}`;
}
