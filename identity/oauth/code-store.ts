/**
 * Authorization codes (`authorization_codes`): SQL only. A code is stored as its SHA-256 with
 * what it is bound to: the client, the exact redirect_uri and the PKCE challenge.
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import { newOpaqueToken, sha256 } from '../tokens/opaque.js';

export interface CodeRecord {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly codeChallenge: string;
  readonly userId: string;
  readonly scope: string;
  readonly nonce: string | undefined;
  readonly authTime: number;
  readonly expiresAt: number;
  readonly consumedAt: number | undefined;
  readonly grantId: string | undefined;
}

export interface NewCode {
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  userId: string;
  scope: string;
  nonce: string | undefined;
  authTimeMs: number;
  nowMs: number;
  ttlMs: number;
}

/** Stores a new code and returns it in clear (it goes into the redirect, once). */
export async function createCode(db: Pool | PoolClient, c: NewCode): Promise<string> {
  const code = newOpaqueToken();
  await db.query(
    `INSERT INTO authorization_codes (code_sha256, client_id, redirect_uri, code_challenge, user_id, scope, nonce, auth_time, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [
      sha256(code),
      c.clientId,
      c.redirectUri,
      c.codeChallenge,
      c.userId,
      c.scope,
      c.nonce ?? null,
      new Date(c.authTimeMs),
      new Date(c.nowMs),
      new Date(c.nowMs + c.ttlMs),
    ],
  );
  return code;
}

/** The code's record, locked for its redemption. */
export async function lockCode(db: PoolClient, code: string): Promise<CodeRecord | undefined> {
  const { rows } = await db.query<{
    client_id: string;
    redirect_uri: string;
    code_challenge: string;
    user_id: string;
    scope: string;
    nonce: string | null;
    auth_time: Date;
    expires_at: Date;
    consumed_at: Date | null;
    grant_id: string | null;
  }>(
    `SELECT client_id, redirect_uri, code_challenge, user_id, scope, nonce, auth_time, expires_at, consumed_at, grant_id
       FROM authorization_codes WHERE code_sha256 = $1 FOR UPDATE`,
    [sha256(code)],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    clientId: r.client_id,
    redirectUri: r.redirect_uri,
    codeChallenge: r.code_challenge,
    userId: r.user_id,
    scope: r.scope,
    nonce: r.nonce ?? undefined,
    authTime: r.auth_time.getTime(),
    expiresAt: r.expires_at.getTime(),
    consumedAt: r.consumed_at ? r.consumed_at.getTime() : undefined,
    grantId: r.grant_id ?? undefined,
  };
}

export async function markCodeConsumed(db: PoolClient, code: string, grantId: string, nowMs: number): Promise<void> {
  await db.query('UPDATE authorization_codes SET consumed_at = $2, grant_id = $3 WHERE code_sha256 = $1', [
    sha256(code),
    new Date(nowMs),
    grantId,
  ]);
}
