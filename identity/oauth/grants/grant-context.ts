/**
 * What the token endpoint hands every grant besides the client and the parameters: the checked
 * DPoP proof of the request, if it had one (RFC 9449 §5). A grant binds the access token it issues
 * to the proof's key (`cnf.jkt`, `token_type: DPoP`); the user grants also bind the refresh-token
 * family of a public client to it.
 */
import type { OAuthClient } from '../../clients/client.js';
import type { CheckedProof } from '../../../shared/dpop/index.js';

export interface GrantContext {
  readonly dpop: CheckedProof | undefined;
}

/** The `token_type` of a token bound (or not) to a DPoP key. */
export function tokenType(jkt: string | undefined): 'DPoP' | 'Bearer' {
  return jkt === undefined ? 'Bearer' : 'DPoP';
}

/** RFC 9449 §5: refresh tokens of public clients are bound to the key; confidential clients authenticate instead. */
export function familyBinding(client: OAuthClient, g: GrantContext): string | undefined {
  return client.type === 'public' ? g.dpop?.jkt : undefined;
}
