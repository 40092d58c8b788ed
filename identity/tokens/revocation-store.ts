/**
 * Revoked access tokens (`revoked_access_tokens`) and the revocation list's rows: SQL only. A
 * refresh token revokes its whole family (`oauth_grants.revoked_at`, grant-store.ts `revokeGrant`);
 * an access token revokes itself by its `jti`, kept until its own expiry. What is published and for
 * how long: identity/oauth/revocation-list.ts.
 */
import type { Pool, PoolClient } from '../../shared/db.js';

type Db = Pool | PoolClient;

/** Records an access token as revoked. True when this call recorded it (false: it already was). */
export async function revokeAccessToken(
  db: Db,
  r: { jti: string; clientId: string; expiresAtMs: number; nowMs: number },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO revoked_access_tokens (jti, client_id, expires_at, revoked_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (jti) DO NOTHING`,
    [r.jti, r.clientId, new Date(r.expiresAtMs), new Date(r.nowMs)],
  );
  return (rowCount ?? 0) > 0;
}

/** Whether an access token (by `jti`) was revoked. */
export async function isAccessTokenRevoked(db: Db, jti: string): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM revoked_access_tokens WHERE jti = $1', [jti]);
  return rows.length > 0;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Whether a verified access token is revoked, by its own `jti` or by its family (`sid`, a grant
 * revoked): one round trip, for identity's resource endpoints (orders, checkout, the projection
 * operator API).
 */
export async function isTokenRevoked(db: Db, jti: string, sid: string | undefined): Promise<boolean> {
  const grant = sid !== undefined && UUID.test(sid) ? sid : null;
  const { rows } = await db.query<{ revoked: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM revoked_access_tokens WHERE jti = $1)
         OR ($2::uuid IS NOT NULL AND EXISTS (SELECT 1 FROM oauth_grants WHERE grant_id = $2::uuid AND revoked_at IS NOT NULL)) AS revoked`,
    [jti, grant],
  );
  return rows[0]?.revoked === true;
}

/** One published entry: an id and the epoch seconds after which no token it names is valid. */
export interface RevokedEntry {
  readonly id: string;
  /** Epoch seconds: the latest `exp` a token of this family (or this token) can carry. */
  readonly exp: number;
}

export interface RevokedRows {
  /** Revoked families (grant ids = the tokens' `sid`), newest revocation first. */
  readonly families: RevokedEntry[];
  /** Revoked access tokens (`jti`), newest revocation first. */
  readonly tokens: RevokedEntry[];
  /** False when more entries were live than `max`: the oldest revocations were left out. */
  readonly complete: boolean;
}

/**
 * What is still worth refusing at `nowMs`: families revoked so recently that one of their access
 * tokens can still be valid (`exp` = revocation + `familyLifetimeMs`), and revoked access tokens
 * not yet expired, each while `exp` + `skewMs` has not passed (a verifier accepts a token until
 * then). At most `max` entries, families first (a revoked family is a session ended or a theft
 * detected; a single access token is the smaller loss), newest first within each kind.
 */
export async function listRevoked(
  db: Db,
  o: { nowMs: number; familyLifetimeMs: number; skewMs: number; max: number },
): Promise<RevokedRows> {
  const families = await db.query<{ grant_id: string; revoked_at: Date }>(
    `SELECT grant_id, revoked_at FROM oauth_grants WHERE revoked_at IS NOT NULL AND revoked_at > $1
      ORDER BY revoked_at DESC LIMIT $2`,
    [new Date(o.nowMs - o.familyLifetimeMs - o.skewMs), o.max + 1],
  );
  const fam = families.rows.slice(0, o.max).map((r) => ({
    id: r.grant_id,
    exp: Math.ceil((r.revoked_at.getTime() + o.familyLifetimeMs) / 1000),
  }));
  const budget = o.max - fam.length;
  const tokens = await db.query<{ jti: string; expires_at: Date }>(
    `SELECT jti, expires_at FROM revoked_access_tokens WHERE expires_at > $1 ORDER BY revoked_at DESC LIMIT $2`,
    [new Date(o.nowMs - o.skewMs), budget + 1],
  );
  const tok = tokens.rows.slice(0, budget).map((r) => ({ id: r.jti, exp: Math.ceil(r.expires_at.getTime() / 1000) }));
  return { families: fam, tokens: tok, complete: families.rows.length <= o.max && tokens.rows.length <= budget };
}

/** Deletes revoked access tokens that have expired (and so are refused anyway). */
export async function purgeRevokedAccessTokens(db: Db, nowMs: number, skewMs: number): Promise<number> {
  const { rowCount } = await db.query('DELETE FROM revoked_access_tokens WHERE expires_at < $1', [new Date(nowMs - skewMs)]);
  return rowCount ?? 0;
}
