/**
 * DPoP state in Postgres (migration 160): the used proofs (the replay store every identity replica
 * shares) and the nonce secret. SQL only; the rules are shared/dpop.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import type { Pool } from '../../shared/db.js';
import type { DpopReplayStore } from '../../shared/dpop/index.js';

/** Expired rows are deleted in passing at most this often per process. */
const PURGE_EVERY_MS = 60_000;

/**
 * `INSERT … ON CONFLICT DO UPDATE … WHERE expired`: one statement; a row comes back when the key
 * is new or its earlier use has expired, none when it is a replay within the window.
 */
export class PgReplayStore implements DpopReplayStore {
  private nextPurgeAt = 0;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  async claim(key: string, ttlMs: number): Promise<boolean> {
    const now = this.clock.now();
    const { rowCount } = await this.pool.query(
      `INSERT INTO dpop_proofs (proof_sha256, expires_at) VALUES ($1, $2)
       ON CONFLICT (proof_sha256) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE dpop_proofs.expires_at <= $3`,
      [createHash('sha256').update(key).digest(), new Date(now + ttlMs), new Date(now)],
    );
    if (now >= this.nextPurgeAt) {
      this.nextPurgeAt = now + PURGE_EVERY_MS;
      await this.pool.query('DELETE FROM dpop_proofs WHERE expires_at <= $1', [new Date(now)]);
    }
    return (rowCount ?? 0) === 1;
  }
}

/** The deployment's nonce secret, created by the first caller (a race is settled by the primary key). */
export async function nonceSecret(pool: Pool, nowMs: number): Promise<Buffer> {
  await pool.query('INSERT INTO dpop_nonce_secret (id, secret, created_at) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING', [
    randomBytes(32),
    new Date(nowMs),
  ]);
  const { rows } = await pool.query<{ secret: Buffer }>('SELECT secret FROM dpop_nonce_secret WHERE id = 1');
  return rows[0]!.secret;
}
