/**
 * Client authentication at the token, device-authorization and introspection endpoints:
 * `client_secret_basic` (RFC 6749 §2.3.1: `Authorization: Basic base64(urlencode(id):urlencode(secret))`),
 * `client_secret_post` (`client_id` and `client_secret` in the form), or `none` for a public client
 * (`client_id` alone). Using two methods at once is `invalid_request`; every failure to
 * authenticate is the same `invalid_client` (401 with a Basic challenge), whatever the reason, so
 * the answer does not tell an unknown client from a wrong secret.
 */
import { OAuthError } from '../oauth/oauth-error.js';
import type { Params } from '../oauth/params.js';
import type { OAuthClient } from './client.js';
import { clientSecretMatches } from './client-secret.js';

export type ClientAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'none';

export interface PresentedClient {
  readonly method: ClientAuthMethod;
  readonly clientId: string;
  readonly secret: string | undefined;
}

function formDecode(s: string): string {
  return decodeURIComponent(s.replace(/\+/g, ' '));
}

/** Reads the client's credentials from the request. Throws `invalid_request` / `invalid_client`. */
export function presentedClient(headers: Readonly<Record<string, string>>, params: Params): PresentedClient {
  const auth = headers['authorization'];
  const formId = params.get('client_id');
  const formSecret = params.get('client_secret');
  if (auth !== undefined && /^basic /i.test(auth)) {
    if (formSecret !== undefined) throw new OAuthError('invalid_request', 'use one client authentication method, not two');
    const decoded = Buffer.from(auth.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    let id: string;
    let secret: string;
    try {
      if (colon < 1) throw new Error('no colon');
      id = formDecode(decoded.slice(0, colon));
      secret = formDecode(decoded.slice(colon + 1));
    } catch {
      throw new OAuthError('invalid_client', 'client authentication failed');
    }
    if (formId !== undefined && formId !== id) throw new OAuthError('invalid_request', 'client_id does not match the Authorization header');
    return { method: 'client_secret_basic', clientId: id, secret };
  }
  if (formId === undefined) throw new OAuthError('invalid_client', 'client authentication failed');
  if (formSecret !== undefined) return { method: 'client_secret_post', clientId: formId, secret: formSecret };
  return { method: 'none', clientId: formId, secret: undefined };
}

/**
 * Authenticates the presented client against its registration. A confidential client must
 * present its secret; a public client must present none. `confidentialOnly` refuses public
 * clients (introspection). Throws `invalid_client`.
 */
export async function authenticateClient(
  presented: PresentedClient,
  lookup: (clientId: string) => Promise<OAuthClient | undefined>,
  opts: { confidentialOnly?: boolean } = {},
): Promise<OAuthClient> {
  const fail = (): never => {
    throw new OAuthError('invalid_client', 'client authentication failed');
  };
  if (presented.clientId.length > 128) fail();
  const client = await lookup(presented.clientId);
  if (!client) return fail();
  if (client.type === 'confidential') {
    if (presented.secret === undefined || !client.secretSha256 || !clientSecretMatches(presented.secret, client.secretSha256)) fail();
  } else {
    if (presented.secret !== undefined || opts.confidentialOnly) fail();
  }
  return client;
}
