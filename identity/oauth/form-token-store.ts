/**
 * Anti-forgery tokens of the sign-in and device pages (`sign_in_forms`): SQL only. Every value is
 * stored as its SHA-256; form-guard.ts decides what they mean.
 */
import type { Pool, PoolClient } from '../../shared/db.js';

export interface FormTokenRow {
  readonly browserSha256: Buffer;
  readonly subjectSha256: Buffer;
  readonly expiresAt: number;
}

export async function insertFormToken(
  db: Pool | PoolClient,
  r: { tokenSha256: Buffer; browserSha256: Buffer; subjectSha256: Buffer; expiresAtMs: number },
): Promise<void> {
  await db.query('INSERT INTO sign_in_forms (token_sha256, browser_sha256, subject_sha256, expires_at) VALUES ($1, $2, $3, $4)', [
    r.tokenSha256,
    r.browserSha256,
    r.subjectSha256,
    new Date(r.expiresAtMs),
  ]);
}

export async function findFormToken(db: Pool | PoolClient, tokenSha256: Buffer): Promise<FormTokenRow | undefined> {
  const { rows } = await db.query<{ browser_sha256: Buffer; subject_sha256: Buffer; expires_at: Date }>(
    'SELECT browser_sha256, subject_sha256, expires_at FROM sign_in_forms WHERE token_sha256 = $1',
    [tokenSha256],
  );
  const r = rows[0];
  return r && { browserSha256: r.browser_sha256, subjectSha256: r.subject_sha256, expiresAt: r.expires_at.getTime() };
}

export async function deleteFormToken(db: Pool | PoolClient, tokenSha256: Buffer): Promise<void> {
  await db.query('DELETE FROM sign_in_forms WHERE token_sha256 = $1', [tokenSha256]);
}

/** Deletes expired tokens; returns how many. */
export async function purgeFormTokens(db: Pool | PoolClient, nowMs: number): Promise<number> {
  const r = await db.query('DELETE FROM sign_in_forms WHERE expires_at <= $1', [new Date(nowMs)]);
  return r.rowCount ?? 0;
}
