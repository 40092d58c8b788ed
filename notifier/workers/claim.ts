/**
 * The claim and the policy check just before the provider call, in one transaction (README,
 * "Notification types, preferences and policies"; notifier/README.md, "Who owns a delivery's
 * state"):
 *
 * 1. the shared preference lock of every user in the batch (preferences/store.ts): a preference
 *    write waits for this transaction, and this one for a write under way, so the check below
 *    reads what a PATCH answered a moment ago;
 * 2. the conditional claim (`queued` → `sending`, delivery-sql.ts);
 * 3. the user's preferences and time zone, read fresh (not from the cache), with a lock timeout:
 *    a store that does not answer is `unavailable` (policy/gate.ts says what then);
 * 4. the gate for each delivery (policy/gate.ts), then the caps: each (user, type, channel) key
 *    is locked, its sliding window counted from `deliveries.counted_at`, and the sends admitted
 *    are counted in the same transaction, so replicas never admit more than the cap between them;
 * 5. the writes: suppressed (`opted_out`, `capped`), held (back to `queued` with its reason and
 *    release time, and a wake-up then; the attempt is not counted), and for a digest's send that
 *    goes ahead, the digest is closed under its row lock and its items read.
 * What comes back is what may be sent now.
 */
import type { Clock } from '../../shared/clock.js';
import { withTransaction, type Pool, type PoolClient } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import type { Tier } from '../channels/channel.js';
import { capVerdicts, gate, type GateDecision, type HoldReason } from '../policy/gate.js';
import { isExempt, policyFor, type PolicySettings } from '../policy/table.js';
import { storedType, type NotificationType, type TypeCatalog } from '../policy/types.js';
import { PREFERENCE_LOCK_NAMESPACE, readWithTimeout, storedPreferences, type PreferenceDoc } from '../preferences/index.js';
import type { Boss } from '../queues/boss.js';
import { wakeDeliveries } from '../queues/wake-ups.js';
import type { PolicyMetrics } from '../metrics.js';
import { claimDeliveries, type ClaimedDelivery } from './delivery-sql.js';

export interface ClaimOptions {
  pool: Pool;
  boss: Boss;
  catalog: TypeCatalog;
  settings: PolicySettings;
  clock: Clock;
  leaseMs: number;
  /** Longest wait for the preference row (NOTIFIER_PREFERENCES_TIMEOUT); then it counts as unreadable. */
  prefsTimeoutMs: number;
  /** When to look again at a send held because the preferences could not be read. */
  unavailableRetryMs: number;
  metrics: PolicyMetrics;
  log: Logger;
}

export interface ClaimResult {
  /** What may be sent now. */
  deliveries: Map<string, ClaimedDelivery>;
  /** Queues with work due now (to poke after the commit). */
  wake: string[];
}

const LOCK_DELIVERY_USERS = `SELECT count(pg_advisory_xact_lock_shared(${PREFERENCE_LOCK_NAMESPACE}, k))
  FROM (SELECT DISTINCT hashtext(recipient_id) AS k FROM deliveries
         WHERE id = ANY($1::uuid[]) AND priority <> 'transactional' ORDER BY k) AS keys`;

/** Namespace of the advisory lock of one cap key ('ncap'). */
const CAP_LOCK_NAMESPACE = 0x6e636170;

/** The type of a claimed delivery (the fallback type for rows older than migration 070). */
export function typeOfDelivery(catalog: TypeCatalog, d: Pick<ClaimedDelivery, 'notification_type' | 'event_type'>): NotificationType {
  return storedType(catalog, d.notification_type, d.event_type);
}

interface Checked {
  d: ClaimedDelivery;
  type: NotificationType;
  decision: GateDecision;
}

/**
 * @param tier the tier of every delivery in `ids` when the caller knows it (a fetched batch of one
 *   queue): a transactional batch is exempt from every policy, so it is claimed with the single
 *   statement alone, no transaction and no lock.
 */
export async function claimAndCheck(o: ClaimOptions, ids: readonly string[], tier?: Tier): Promise<ClaimResult> {
  const now = o.clock.now();
  if (tier === 'transactional') return { deliveries: await claimDeliveries(o.pool, ids, o.leaseMs, now), wake: [] };
  return withTransaction(o.pool, async (client) => {
    await client.query(LOCK_DELIVERY_USERS, [[...new Set(ids)]]);
    const claimed = await claimDeliveries(client, ids, o.leaseMs, now);
    const checked: Checked[] = [];
    for (const d of claimed.values()) {
      const type = typeOfDelivery(o.catalog, d);
      if (!isExempt(type, d.priority)) checked.push({ d, type, decision: { do: 'send' } });
    }
    if (checked.length === 0) return { deliveries: claimed, wake: [] };

    const users = await readUsers(client, [...new Set(checked.map((c) => c.d.recipient_id))], o.prefsTimeoutMs);
    if (users === 'unavailable') o.metrics.preferenceFallback('check', checked.length);
    for (const c of checked) {
      const u = users === 'unavailable' ? undefined : users.get(c.d.recipient_id);
      c.decision = gate({
        channel: c.d.channel,
        tier: c.d.priority,
        type: c.type,
        policy: policyFor(c.type, c.d.priority, o.settings),
        prefs: users === 'unavailable' ? 'unavailable' : (u?.prefs ?? { types: {} }),
        timeZone: u?.timeZone,
        nowMs: now,
        retryMs: o.unavailableRetryMs,
        alreadyCounted: c.d.counted,
      });
    }
    await applyCaps(client, checked, now);

    const holds: { id: string; reason: HoldReason; untilMs: number; channel: ClaimedDelivery['channel']; tier: Tier }[] = [];
    const suppressed: { id: string; status: 'opted_out' | 'capped'; detail: string }[] = [];
    for (const c of checked) {
      const x = c.decision;
      o.metrics.policyDecision(c.type.name, c.d.channel, x.do === 'hold' ? x.reason : x.do === 'opt_out' ? 'opted_out' : x.do);
      if (x.do === 'hold') holds.push({ id: c.d.id, reason: x.reason, untilMs: x.untilMs, channel: c.d.channel, tier: c.d.priority });
      else if (x.do === 'opt_out') suppressed.push({ id: c.d.id, status: 'opted_out', detail: x.detail });
      else if (x.do === 'cap') {
        // The cap refused it (applyCaps turned every admitted one into `send`).
        suppressed.push({ id: c.d.id, status: 'capped', detail: `over the ${c.type.name} ${c.d.channel} cap` });
      }
      if (x.do !== 'send') claimed.delete(c.d.id);
    }
    const wake: string[] = [];
    if (suppressed.length > 0) {
      await client.query(
        `UPDATE deliveries d SET status = s.status, attempts = greatest(d.attempts - 1, 0), sending_since = NULL,
                next_attempt_at = NULL, last_error = s.detail, updated_at = now()
           FROM unnest($1::uuid[], $2::text[], $3::text[]) AS s (id, status, detail)
          WHERE d.id = s.id AND d.status = 'sending'`,
        [suppressed.map((s) => s.id), suppressed.map((s) => s.status), suppressed.map((s) => `${s.status}: ${s.detail}`)],
      );
      // A digest's send that is suppressed takes its open digest with it: close it.
      await client.query(
        `UPDATE digests g SET status = 'closed', closed_at = now() FROM deliveries d
          WHERE d.id = ANY($1::uuid[]) AND d.kind = 'digest' AND g.id = d.digest_id AND g.status = 'open'`,
        [suppressed.map((s) => s.id)],
      );
    }
    if (holds.length > 0) {
      await client.query(
        `UPDATE deliveries d SET status = 'queued', attempts = greatest(d.attempts - 1, 0), sending_since = NULL,
                hold_reason = h.reason, next_attempt_at = to_timestamp(h.until_ms / 1000), updated_at = now()
           FROM unnest($1::uuid[], $2::text[], $3::float8[]) AS h (id, reason, until_ms)
          WHERE d.id = h.id AND d.status = 'sending'`,
        [holds.map((h) => h.id), holds.map((h) => h.reason), holds.map((h) => h.untilMs)],
      );
      wake.push(
        ...(await wakeDeliveries(
          client,
          o.boss,
          holds.map((h) => ({ deliveryId: h.id, channel: h.channel, tier: h.tier, delayMs: Math.max(0, h.untilMs - now) })),
        )),
      );
    }
    await flushDigests(
      client,
      o,
      [...claimed.values()].filter((d) => d.kind === 'digest'),
    );
    return { deliveries: claimed, wake };
  });
}

interface UserFacts {
  prefs: PreferenceDoc;
  timeZone: string | undefined;
}

/** The users' preferences and time zones, or `unavailable` when the row could not be read in time. */
async function readUsers(client: PoolClient, users: string[], timeoutMs: number): Promise<Map<string, UserFacts> | 'unavailable'> {
  try {
    const { rows } = await readWithTimeout(client, timeoutMs, () =>
      client.query<{ user_id: string; prefs: unknown; timezone: string | null }>(
        `SELECT u.id AS user_id, p.prefs, pr.timezone
           FROM unnest($1::text[]) AS u (id)
           LEFT JOIN user_preferences p ON p.user_id = u.id
           LEFT JOIN user_profiles pr ON pr.user_id = u.id`,
        [users],
      ),
    );
    return new Map(rows.map((r) => [r.user_id, { prefs: storedPreferences(r.prefs ?? {}), timeZone: r.timezone ?? undefined }]));
  } catch {
    return 'unavailable';
  }
}

/**
 * The caps of the checked sends still marked `cap`: per key, under its lock, the window's count;
 * the admitted ones are counted (`counted_at`) and become `send`; the others stay `cap` (a single
 * send is then `capped`) or, for a digest's send, are held until the window frees a slot.
 */
async function applyCaps(client: PoolClient, checked: Checked[], now: number): Promise<void> {
  const byKey = new Map<string, Checked[]>();
  for (const c of checked) {
    if (c.decision.do !== 'cap') continue;
    const key = `${c.d.recipient_id}\n${c.type.name}\n${c.d.channel}`;
    byKey.set(key, [...(byKey.get(key) ?? []), c]);
  }
  if (byKey.size === 0) return;
  const keys = [...byKey.keys()].sort();
  await client.query(
    `SELECT count(pg_advisory_xact_lock(${CAP_LOCK_NAMESPACE}, k))
       FROM (SELECT DISTINCT hashtext(key) AS k FROM unnest($1::text[]) AS key ORDER BY k) AS keys`,
    [keys],
  );
  const firsts = keys.map((k) => byKey.get(k)![0]!);
  // count(counted_at), not count(id): the partial index deliveries_cap_window answers it alone.
  const { rows } = await client.query<{ i: string; n: number; oldest_ms: number | null }>(
    `SELECT k.i, count(d.counted_at)::int AS n, (extract(epoch FROM min(d.counted_at)) * 1000)::float8 AS oldest_ms
       FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[]) WITH ORDINALITY AS k (u, t, c, since_ms, i)
       LEFT JOIN deliveries d ON d.recipient_id = k.u AND d.notification_type = k.t AND d.channel = k.c
                             AND d.counted_at > to_timestamp(k.since_ms / 1000)
      GROUP BY k.i`,
    [
      firsts.map((c) => c.d.recipient_id),
      firsts.map((c) => c.type.name),
      firsts.map((c) => c.d.channel),
      firsts.map((c) => {
        const x = c.decision as Extract<GateDecision, { do: 'cap' }>;
        return now - x.rule.windowMs;
      }),
    ],
  );
  const admitted: string[] = [];
  for (const r of rows) {
    const group = byKey.get(keys[Number(r.i) - 1]!)!;
    const rule = (group[0]!.decision as Extract<GateDecision, { do: 'cap' }>).rule;
    const verdicts = capVerdicts(group.length, r.n, r.oldest_ms ?? undefined, rule, now);
    group.forEach((c, k) => {
      const v = verdicts[k]!;
      if (v.admit) {
        c.decision = { do: 'send' };
        admitted.push(c.d.id);
      } else if (c.d.kind === 'digest') c.decision = { do: 'hold', reason: 'digest', untilMs: v.freeAtMs! };
    });
  }
  if (admitted.length > 0) {
    await client.query('UPDATE deliveries SET counted_at = to_timestamp($2::double precision / 1000) WHERE id = ANY($1::uuid[])', [
      admitted,
      now,
    ]);
  }
}

/**
 * Closes the digests whose sends go ahead (in key order, as joins lock them: workers/route.ts) and
 * reads their items. A digest already closed (its send is being retried, or taken over after a
 * crash) is read again as it was closed: the same items, never more.
 */
async function flushDigests(client: PoolClient, o: ClaimOptions, sends: ClaimedDelivery[]): Promise<void> {
  const keyOf = (d: ClaimedDelivery): string => `${d.recipient_id}\n${typeOfDelivery(o.catalog, d).name}\n${d.channel}`;
  sends.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
  for (const d of sends) {
    if (d.digest_id === null) continue;
    const type = typeOfDelivery(o.catalog, d);
    await client.query(`UPDATE digests SET status = 'closed', closed_at = now() WHERE id = $1 AND status = 'open'`, [d.digest_id]);
    const { rows } = await client.query<{ data: Record<string, string>; total: number }>(
      `SELECT data, total FROM (
         SELECT n.template_data AS data, d.created_at, d.id, count(*) OVER () AS total
           FROM deliveries d JOIN notifications n ON n.id = d.notification_id
          WHERE d.digest_id = $1 AND d.kind = 'single'
          ORDER BY d.created_at DESC, d.id DESC LIMIT $2) recent
       ORDER BY created_at, id`,
      [d.digest_id, type.digest?.maxItems ?? 50],
    );
    const count = Number(rows[0]?.total ?? 0);
    await client.query('UPDATE digests SET items = $2 WHERE id = $1', [d.digest_id, count]);
    d.digest = { items: rows.map((r) => r.data), count };
    o.metrics.digestFlushed(type.name, count);
  }
}
