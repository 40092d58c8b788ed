/**
 * Compact JWS signing with node:crypto: one synchronous `crypto.sign` per token with the imported
 * key, the protected header precomputed per key (key-material.ts). ES256 signatures are the raw
 * r‖s form JWS requires (RFC 7518 §3.4), not DER.
 */
import { sign } from 'node:crypto';
import type { SigningKey } from '../keys/key-material.js';

export type TokenTyp = 'at+jwt' | 'JWT';

export function signJwt(key: SigningKey, typ: TokenTyp, payload: Record<string, unknown>): string {
  const header = typ === 'at+jwt' ? key.accessTokenHeader : key.idTokenHeader;
  const input = `${header}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  const data = Buffer.from(input);
  const sig =
    key.alg === 'ES256' ? sign('sha256', data, { key: key.privateKey, dsaEncoding: 'ieee-p1363' }) : sign('sha256', data, key.privateKey);
  return `${input}.${sig.toString('base64url')}`;
}
