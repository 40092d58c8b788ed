/**
 * The e-mail suppression list: addresses a permanent bounce or a complaint put there
 * (writer.ts), read before each send (one query per claimed batch, workers/deliver.ts), listed,
 * read and removed by an operator (suppression-routes.ts). Addresses are stored lower-cased.
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import { invalidField } from '../../shared/errors.js';

export interface SuppressionView {
  address: string;
  reason: 'bounce' | 'complaint';
  detail: string | null;
  provider: string;
  delivery_id: string | null;
  /** Epoch seconds. */
  created_at: number;
}

/** The suppression of each of these addresses that has one (keys lower-cased). */
export async function suppressedAmong(db: Pool | PoolClient, addresses: readonly string[]): Promise<Map<string, SuppressionView>> {
  const wanted = [...new Set(addresses.map((a) => a.toLowerCase()))];
  if (wanted.length === 0) return new Map();
  const { rows } = await db.query<SuppressionView>(`${SELECT} WHERE address = ANY($1::text[])`, [wanted]);
  return new Map(rows.map((r) => [r.address, r]));
}

const SELECT = `SELECT address, reason, detail, provider, delivery_id::text AS delivery_id,
       extract(epoch FROM created_at)::float8 AS created_at, created_at::text AS created_at_text
  FROM email_suppressions`;

function view(r: SuppressionView & { created_at_text?: string }): SuppressionView {
  const { created_at_text: _t, ...rest } = r;
  return rest;
}

function encodeCursor(t: string, address: string): string {
  return Buffer.from(JSON.stringify([t, address])).toString('base64url');
}

function decodeCursor(raw: string): { t: string; address: string } {
  try {
    const v: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string' && !Number.isNaN(Date.parse(v[0]))) {
      return { t: v[0], address: v[1] };
    }
  } catch {
    // fall through
  }
  throw invalidField('cursor', 'is not a cursor this list returned');
}

/** Oldest first, `limit` per page. */
export async function listSuppressions(
  pool: Pool,
  q: { reason?: 'bounce' | 'complaint'; cursor?: string; limit: number },
): Promise<{ suppressions: SuppressionView[]; next_cursor?: string }> {
  const params: unknown[] = [q.limit + 1];
  const where: string[] = [];
  if (q.reason) where.push(`reason = $${params.push(q.reason)}`);
  if (q.cursor) {
    const c = decodeCursor(q.cursor);
    where.push(`(created_at, address) > ($${params.push(c.t)}::timestamptz, $${params.push(c.address)})`);
  }
  const { rows } = await pool.query<SuppressionView & { created_at_text: string }>(
    `${SELECT} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, address LIMIT $1`,
    params,
  );
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  const out: { suppressions: SuppressionView[]; next_cursor?: string } = { suppressions: page.map(view) };
  if (rows.length > q.limit && last) out.next_cursor = encodeCursor(last.created_at_text, last.address);
  return out;
}

export async function getSuppression(pool: Pool, address: string): Promise<SuppressionView | undefined> {
  const { rows } = await pool.query<SuppressionView>(`${SELECT} WHERE address = $1`, [address.toLowerCase()]);
  return rows[0] ? view(rows[0]) : undefined;
}

/** True when the address was on the list. */
export async function removeSuppression(pool: Pool, address: string): Promise<boolean> {
  const r = await pool.query('DELETE FROM email_suppressions WHERE address = $1', [address.toLowerCase()]);
  return (r.rowCount ?? 0) > 0;
}

/** The reason a suppressed send shows (no address: the status view reaches the sender too). */
export function suppressedReason(s: Pick<SuppressionView, 'reason' | 'created_at'>): string {
  const when = new Date(s.created_at * 1000).toISOString();
  return `suppressed: the address is on the suppression list after ${s.reason === 'bounce' ? 'a permanent bounce' : 'a complaint'} (${when})`;
}
