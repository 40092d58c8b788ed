/**
 * Request parameters of the OAuth endpoints: the `application/x-www-form-urlencoded` body of a
 * POST, or the query of a GET. RFC 6749 §3.1: a parameter sent without a value counts as omitted,
 * and no parameter may appear twice (a duplicated `redirect_uri` or `code_verifier` is how
 * parameter-pollution attacks slip past a check), so a repeat is `invalid_request`.
 */
import type { RequestContext } from '../../shared/http.js';
import { OAuthError } from './oauth-error.js';

export type Params = ReadonlyMap<string, string>;

const MAX_PARAM_LENGTH = 8192;

/** Parses urlencoded text; throws `invalid_request` naming a repeated or oversized parameter. */
export function parseParams(text: string): Params {
  const out = new Map<string, string>();
  for (const [k, v] of new URLSearchParams(text)) {
    if (v === '') continue;
    if (out.has(k)) throw new OAuthError('invalid_request', `parameter ${k.slice(0, 40)} is given more than once`);
    if (v.length > MAX_PARAM_LENGTH) throw new OAuthError('invalid_request', `parameter ${k.slice(0, 40)} is too long`);
    out.set(k, v);
  }
  return out;
}

/** The form body of a POST; `invalid_request` unless it is `application/x-www-form-urlencoded`. */
export function formParams(ctx: RequestContext): Params {
  const ct = (ctx.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (ct !== 'application/x-www-form-urlencoded') {
    throw new OAuthError('invalid_request', 'the body must be application/x-www-form-urlencoded');
  }
  return parseParams(ctx.body.toString('utf8'));
}

/** A required parameter; `invalid_request` naming it when absent. */
export function required(p: Params, name: string): string {
  const v = p.get(name);
  if (v === undefined) throw new OAuthError('invalid_request', `parameter ${name} is required`);
  return v;
}
