/**
 * The audit trail of staff reads (README, "Roles and what they may do": support may read any order,
 * and each such read is
 * recorded). `auditedRead` runs the read and writes one `order_access_audit` row (actor, subject,
 * reason, outcome, time) in the same transaction: a read that happened is never missing from the
 * trail, and a refused or not-found read is recorded too (its outcome is the error code). The
 * reason comes from the caller (the `reason` query parameter; see the README).
 */
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import { isPlatformError } from '../../shared/errors.js';
import { hashSubject, type Logger } from '../../shared/log.js';
import type { Actor } from '../domain/actor.js';

export interface AuditEntry {
  readonly actor: Actor;
  /** `order_read`, `orders_listed`, `payment_method_read`. */
  readonly action: string;
  /** `order:<id>` or `customer:<id>`. */
  readonly subject: string;
  readonly reason: string;
}

const INSERT = {
  name: 'order_access_audit_insert',
  text: `INSERT INTO order_access_audit (actor_id, actor_role, action, subject, reason, outcome, at)
         VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7::float8 / 1000))`,
};

/**
 * Runs `read` on one connection inside a transaction and records `entry` with its outcome before
 * COMMIT. A refusal (a PlatformError such as order_not_found) is recorded and committed, then
 * rethrown; any other failure rolls back and is rethrown.
 */
export async function auditedRead<T>(
  pool: pg.Pool,
  deps: { clock: Clock; log: Logger },
  entry: AuditEntry,
  read: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    let out: { ok: true; value: T } | { ok: false; err: unknown };
    try {
      out = { ok: true, value: await read(client) };
    } catch (err) {
      if (!isPlatformError(err)) throw err;
      out = { ok: false, err };
    }
    const outcome = out.ok ? 'ok' : isPlatformError(out.err) ? out.err.code : 'error';
    const { actor } = entry;
    await client.query({
      ...INSERT,
      values: [actor.id, actor.role, entry.action, entry.subject, entry.reason, outcome, deps.clock.now()],
    });
    await client.query('COMMIT');
    // The log line is a hint for operators; the table is the record. Identifiers are hashed.
    deps.log.info(
      { audit: entry.action, actor: hashSubject(actor.id), role: actor.role, subject: hashSubject(entry.subject), outcome },
      'order data read by staff',
    );
    if (!out.ok) throw out.err;
    return out.value;
  } catch (err) {
    if (!isPlatformError(err)) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
    }
    throw err;
  } finally {
    client.release(broken);
  }
}
