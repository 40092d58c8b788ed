/**
 * Deleting what can no longer be used: authorization and device codes a day past expiry (kept that
 * long so a late replay of a code is still recognised and revokes), refresh tokens past expiry
 * plus the grace window, revoked access tokens past their expiry, and grants with no refresh token left whose access tokens have expired.
 * Security events are kept.
 */
import type { Pool } from '../../shared/db.js';
import { purgeRevokedAccessTokens } from '../tokens/revocation-store.js';

const DAY_MS = 86_400_000;

export interface PurgeResult {
  codes: number;
  deviceCodes: number;
  refreshTokens: number;
  grants: number;
  /** Revoked access tokens past their expiry (refused anyway). */
  revokedTokens: number;
}

export async function purgeExpired(
  pool: Pool,
  nowMs: number,
  s: { refreshGraceMs: number; accessTokenTtlMs: number; clockSkewSec: number },
): Promise<PurgeResult> {
  const codes = await pool.query('DELETE FROM authorization_codes WHERE expires_at < $1', [new Date(nowMs - DAY_MS)]);
  const devices = await pool.query('DELETE FROM device_codes WHERE expires_at < $1', [new Date(nowMs - DAY_MS)]);
  const tokens = await pool.query('DELETE FROM refresh_tokens WHERE expires_at < $1', [new Date(nowMs - s.refreshGraceMs)]);
  const grants = await pool.query(
    `DELETE FROM oauth_grants g WHERE g.created_at < $1
        AND NOT EXISTS (SELECT 1 FROM refresh_tokens t WHERE t.grant_id = g.grant_id)`,
    [new Date(nowMs - s.accessTokenTtlMs - s.clockSkewSec * 1000 - DAY_MS)],
  );
  const revokedTokens = await purgeRevokedAccessTokens(pool, nowMs, s.clockSkewSec * 1000);
  return {
    revokedTokens,
    codes: codes.rowCount ?? 0,
    deviceCodes: devices.rowCount ?? 0,
    refreshTokens: tokens.rowCount ?? 0,
    grants: grants.rowCount ?? 0,
  };
}
