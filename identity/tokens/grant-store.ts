/**
 * Grants and refresh tokens (`oauth_grants`, `refresh_tokens`): SQL only. The rotation rules are
 * refresh-rotation.ts.
 */
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from '../../shared/db.js';
import { newOpaqueToken, newRotationPads, refreshTokenBytes, refreshTokenHash } from './opaque.js';

type Db = Pool | PoolClient;

export interface Grant {
  readonly grantId: string;
  readonly userId: string;
  readonly clientId: string;
  /** Granted scopes, space-separated (OpenID and API scopes). */
  readonly scope: string;
  /** Epoch ms of the sign-in. */
  readonly authTime: number;
  readonly createdAt: number;
  readonly revokedAt: number | undefined;
  /**
   * RFC 7638 thumbprint of the DPoP key the family is bound to (a public client that used DPoP):
   * every refresh needs a proof made with that key. Absent: not bound.
   */
  readonly dpopJkt?: string | undefined;
}

export interface GrantRow {
  grant_id: string;
  user_id: string;
  client_id: string;
  scope: string;
  auth_time: Date;
  created_at: Date;
  revoked_at: Date | null;
  dpop_jkt: string | null;
}

const GRANT_COLUMNS = 'grant_id, user_id, client_id, scope, auth_time, created_at, revoked_at, dpop_jkt';

export function grantFromRow(r: GrantRow): Grant {
  return {
    grantId: r.grant_id,
    userId: r.user_id,
    clientId: r.client_id,
    scope: r.scope,
    authTime: r.auth_time.getTime(),
    createdAt: r.created_at.getTime(),
    revokedAt: r.revoked_at ? r.revoked_at.getTime() : undefined,
    dpopJkt: r.dpop_jkt ?? undefined,
  };
}

export interface NewGrant {
  userId: string;
  clientId: string;
  scope: string;
  authTimeMs: number;
  nowMs: number;
  /** Issue the family's first refresh token with this lifetime; undefined: no refresh token. */
  refreshTtlMs: number | undefined;
  /** Bind the family's refresh tokens to this DPoP key (public clients that used DPoP). */
  dpopJkt?: string | undefined;
}

/** Creates a grant and, when asked, its first refresh token (returned in clear, once). */
export async function createGrant(db: Db, g: NewGrant): Promise<{ grant: Grant; refreshToken: string | undefined }> {
  const grantId = randomUUID();
  const now = new Date(g.nowMs);
  const pads = newRotationPads();
  await db.query(
    `INSERT INTO oauth_grants (grant_id, user_id, client_id, scope, auth_time, created_at, rotation_ipad, rotation_opad, dpop_jkt)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [grantId, g.userId, g.clientId, g.scope, new Date(g.authTimeMs), now, pads.ipad, pads.opad, g.dpopJkt ?? null],
  );
  let refreshToken: string | undefined;
  if (g.refreshTtlMs !== undefined) {
    refreshToken = newOpaqueToken();
    await db.query(`INSERT INTO refresh_tokens (token_sha256, grant_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`, [
      refreshTokenHash(refreshTokenBytes(refreshToken)!),
      grantId,
      now,
      new Date(g.nowMs + g.refreshTtlMs),
    ]);
  }
  const grant: Grant = {
    grantId,
    userId: g.userId,
    clientId: g.clientId,
    scope: g.scope,
    authTime: g.authTimeMs,
    createdAt: g.nowMs,
    revokedAt: undefined,
    dpopJkt: g.dpopJkt,
  };
  return { grant, refreshToken };
}

export async function getGrant(db: Db, grantId: string): Promise<Grant | undefined> {
  const { rows } = await db.query<GrantRow>(`SELECT ${GRANT_COLUMNS} FROM oauth_grants WHERE grant_id = $1`, [grantId]);
  return rows[0] ? grantFromRow(rows[0]) : undefined;
}

/** Revokes a grant (its whole refresh-token family). True when this call revoked it. */
export async function revokeGrant(db: Db, grantId: string, reason: string, nowMs: number): Promise<boolean> {
  const { rowCount } = await db.query(
    'UPDATE oauth_grants SET revoked_at = $2, revoked_reason = $3 WHERE grant_id = $1 AND revoked_at IS NULL',
    [grantId, new Date(nowMs), reason],
  );
  return (rowCount ?? 0) > 0;
}

/** What the rotation statement saw of the presented token (after waiting for its row lock). */
export interface RotationRow {
  grant: Grant;
  expiresAt: number;
  rotatedAt: number | undefined;
  successorSha256: Buffer | undefined;
  /** The successor's raw bytes (HMAC of the presented token under the grant key). */
  successor: Buffer;
  /** True when this statement rotated the token and inserted the successor. */
  rotatedNow: boolean;
}

/**
 * The rotation in one statement (one round trip, committed on its own): lock the presented
 * token's row (`FOR UPDATE`, so a concurrent rotation of the same token waits and then sees it
 * rotated), and when it is current, unexpired, of this client, of a live grant that holds every
 * requested scope, and (for a DPoP-bound family) presented with a proof of the family's key, mark
 * it rotated and insert its successor. Whatever happened, the locked row is
 * returned, so the caller can tell a refusal, a retry and a reuse apart. The statement's
 * conditions are exactly `decideRotation`'s `rotate` case.
 */
export async function rotateStatement(
  pool: Pool,
  r: {
    tokenSha256: Buffer;
    raw: Buffer;
    clientId: string;
    scopes: readonly string[];
    nowMs: number;
    ttlMs: number;
    /** Thumbprint of the DPoP proof's key, if the request had one. */
    jkt?: string | undefined;
  },
): Promise<RotationRow | undefined> {
  const { rows } = await pool.query<
    GrantRow & { expires_at: Date; rotated_at: Date | null; successor_sha256: Buffer | null; successor: Buffer; rotated_now: boolean }
  >(
    `WITH cur AS (
       SELECT t.token_sha256, t.expires_at, t.rotated_at, t.successor_sha256,
              g.grant_id, g.user_id, g.client_id, g.scope, g.auth_time, g.created_at, g.revoked_at, g.dpop_jkt,
              sha256(g.rotation_opad || sha256(g.rotation_ipad || $2::bytea)) AS successor
         FROM refresh_tokens t JOIN oauth_grants g ON g.grant_id = t.grant_id
        WHERE t.token_sha256 = $1
        FOR UPDATE OF t
     ), ok AS (
       SELECT token_sha256, grant_id, successor FROM cur
        WHERE rotated_at IS NULL AND revoked_at IS NULL AND expires_at > $3 AND client_id = $4
          AND string_to_array(scope, ' ') @> $6::text[]
          AND (dpop_jkt IS NULL OR dpop_jkt = $7)
     ), rotated AS (
       UPDATE refresh_tokens t SET rotated_at = $3, successor_sha256 = sha256(ok.successor)
         FROM ok WHERE t.token_sha256 = ok.token_sha256
       RETURNING t.token_sha256
     ), inserted AS (
       INSERT INTO refresh_tokens (token_sha256, grant_id, parent_sha256, created_at, expires_at)
       SELECT sha256(ok.successor), ok.grant_id, ok.token_sha256, $3, $5 FROM ok JOIN rotated USING (token_sha256)
       RETURNING 1
     )
     SELECT cur.grant_id, cur.user_id, cur.client_id, cur.scope, cur.auth_time, cur.created_at, cur.revoked_at, cur.dpop_jkt,
            cur.expires_at, cur.rotated_at, cur.successor_sha256, cur.successor,
            EXISTS (SELECT 1 FROM inserted) AS rotated_now
       FROM cur`,
    [r.tokenSha256, r.raw, new Date(r.nowMs), r.clientId, new Date(r.nowMs + r.ttlMs), r.scopes, r.jkt ?? null],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    grant: grantFromRow(row),
    expiresAt: row.expires_at.getTime(),
    rotatedAt: row.rotated_at ? row.rotated_at.getTime() : undefined,
    successorSha256: row.successor_sha256 ?? undefined,
    successor: row.successor,
    rotatedNow: row.rotated_now,
  };
}

/** Whether a token is still the current one of its family (not rotated out). */
export async function isCurrent(db: Db, tokenSha256: Buffer): Promise<boolean> {
  const { rows } = await db.query<{ rotated_at: Date | null }>('SELECT rotated_at FROM refresh_tokens WHERE token_sha256 = $1', [
    tokenSha256,
  ]);
  return rows[0] !== undefined && rows[0].rotated_at === null;
}

/** A refresh token's state for introspection, without locking. */
export async function findRefreshToken(
  db: Db,
  tokenSha256: Buffer,
): Promise<{ grant: Grant; createdAt: number; expiresAt: number; rotatedAt: number | undefined } | undefined> {
  const { rows } = await db.query<GrantRow & { expires_at: Date; t_created_at: Date; rotated_at: Date | null }>(
    `SELECT g.grant_id, g.user_id, g.client_id, g.scope, g.auth_time, g.created_at, g.revoked_at, g.dpop_jkt,
            t.expires_at, t.created_at AS t_created_at, t.rotated_at
       FROM refresh_tokens t JOIN oauth_grants g ON g.grant_id = t.grant_id
      WHERE t.token_sha256 = $1`,
    [tokenSha256],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    grant: grantFromRow(r),
    createdAt: r.t_created_at.getTime(),
    expiresAt: r.expires_at.getTime(),
    rotatedAt: r.rotated_at ? r.rotated_at.getTime() : undefined,
  };
}
