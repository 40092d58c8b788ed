/**
 * The e-mail suppression list: addresses a permanent bounce or a complaint put there
 * (writer.ts), read before each send (one query per claimed batch, workers/deliver.ts), listed,
 * read and removed by an operator (suppression-routes.ts). Addresses are stored lower-cased.
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import { invalidField } from '../../shared/errors.js';

export type SuppressionReason = 'bounce' | 'complaint' | 'manual';

export interface SuppressionView {
  address: string;
  reason: SuppressionReason;
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

/**
 * Oldest first, `limit` per page. `contains`: only addresses containing this text (lower-cased;
 * a domain such as `@example.com` or a fragment of the local part): a filtered walk of the
 * (created_at, address) index, fine for an operator's page, not a hot path.
 */
export async function listSuppressions(
  pool: Pool,
  q: { reason?: SuppressionReason; contains?: string; cursor?: string; limit: number },
): Promise<{ suppressions: SuppressionView[]; next_cursor?: string }> {
  const params: unknown[] = [q.limit + 1];
  const where: string[] = [];
  if (q.reason) where.push(`reason = $${params.push(q.reason)}`);
  if (q.contains) where.push(`strpos(address, $${params.push(q.contains.toLowerCase())}) > 0`);
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

/**
 * Puts an address on the list by an operator's hand (reason `manual`, provider `operator`); an
 * address already listed keeps its entry (its first reason stands). `created` says which.
 */
export async function addSuppression(
  pool: Pool,
  address: string,
  detail: string | null,
): Promise<{ created: boolean; entry: SuppressionView }> {
  const a = address.toLowerCase();
  const ins = await pool.query(
    `INSERT INTO email_suppressions (address, reason, detail, provider) VALUES ($1, 'manual', $2, 'operator')
     ON CONFLICT (address) DO NOTHING`,
    [a, detail],
  );
  const entry = await getSuppression(pool, a);
  // Removed between the two statements: report what was asked for as not created.
  if (!entry) throw new Error(`suppression of ${a} vanished while it was added`);
  return { created: (ins.rowCount ?? 0) > 0, entry };
}

/** True when the address was on the list. */
export async function removeSuppression(pool: Pool, address: string): Promise<boolean> {
  const r = await pool.query('DELETE FROM email_suppressions WHERE address = $1', [address.toLowerCase()]);
  return (r.rowCount ?? 0) > 0;
}

/** The reason a suppressed send shows (no address: the status view reaches the sender too). */
export function suppressedReason(s: Pick<SuppressionView, 'reason' | 'created_at'>): string {
  const when = new Date(s.created_at * 1000).toISOString();
  const why = s.reason === 'bounce' ? 'after a permanent bounce' : s.reason === 'complaint' ? 'after a complaint' : 'by an operator';
  return `suppressed: the address is on the suppression list ${why} (${when})`;
}
