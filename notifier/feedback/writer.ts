/**
 * Records provider feedback and applies it, in batches: events arriving together (a provider's
 * burst, 10 000 callbacks at once) share one transaction of a few statements, written one batch at
 * a time on one connection, so a flood of webhooks takes one pool connection and never starves
 * the delivery workers. Each webhook is answered once its batch has committed.
 *
 * One batch, in one transaction:
 * 1. the events are inserted into `provider_events`, once per (provider, event key): an event
 *    already there is a replay (`duplicate`) and changes nothing;
 * 2. the deliveries they name (by `provider_message_id` and channel) are locked in id order, as
 *    the sent records and the claims lock them;
 * 3. each event, in order of arrival, moves its delivery if tracking/states.ts allows
 *    (`moved`), else it is only recorded (`recorded`); an event no delivery carries is `unknown`
 *    (answered 200 so the provider stops retrying, counted, and matched again later by
 *    {@link FeedbackWriter.rematch}: its `sent` may not have been recorded yet);
 * 4. the addresses a permanent bounce or a complaint of one of our deliveries names go on the
 *    suppression list. An `unknown` event suppresses nothing: its addresses wait with it
 *    (`provider_events.suppress`) and are applied only if it later matches one of our deliveries.
 *    A signed event naming a message we never sent is not a reason to stop mailing anyone
 *    (issue 24); putting an address on the list by hand is an operator's call (the console).
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import { withTransaction } from '../../shared/db.js';
import { PlatformError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { canApplyFeedback, type DeliveryStatus, type FeedbackState } from '../tracking/states.js';
import { targetState, type FeedbackEvent, type FeedbackKind, type FeedbackProvider, type Suppress } from './events.js';

export type EventResult = 'moved' | 'recorded' | 'duplicate' | 'unknown';

/** What the feedback reports (notifier/metrics.ts). */
export interface FeedbackMetrics {
  /** One webhook event and what became of it. */
  webhookEvent(
    provider: FeedbackProvider,
    type: FeedbackKind | 'unreadable' | 'subscription',
    result: EventResult | 'ignored' | 'matched_late',
  ): void;
  /** A webhook refused before anything changed. */
  webhookRejected(provider: FeedbackProvider, reason: WebhookRejection): void;
  /** An event for a message no delivery carries. */
  unknownMessage(provider: FeedbackProvider): void;
  /**
   * A verified event whose provider status we do not know (recorded, no state change). `status`
   * is bounded by the caller: one of the provider's documented values, else `other`.
   */
  unknownStatus(provider: FeedbackProvider, status: string): void;
  /** An address put on the suppression list. */
  suppressionAdded(reason: Suppress['reason']): void;
  /** A send not made because its address is suppressed. */
  suppressedSend(channel: string): void;
}

export type WebhookRejection =
  | 'unsigned'
  | 'bad_signature'
  | 'cert_not_allowed'
  | 'cert_unusable'
  | 'cert_unavailable'
  | 'topic_not_allowed'
  | 'no_topics'
  | 'stale'
  | 'future'
  | 'invalid'
  | 'overloaded';

export interface FeedbackWriterOptions {
  pool: Pool;
  metrics: FeedbackMetrics;
  log: Logger;
  /** Events in one transaction at most. */
  maxItems?: number;
  /** How long the first event of a batch waits for others, ms. */
  maxDelayMs?: number;
  /** Events waiting at most; past it a webhook is answered 503 (the provider retries). */
  maxQueued?: number;
}

interface Pending {
  event: FeedbackEvent;
  resolve: (r: EventResult) => void;
  reject: (err: unknown) => void;
}

/** An event stored, with its row id, ready to apply. */
interface Stored {
  rowId: string;
  event: Pick<FeedbackEvent, 'channel' | 'providerMessageId' | 'kind' | 'errorCode' | 'detail'>;
}

export class FeedbackWriter {
  readonly #o: Required<Omit<FeedbackWriterOptions, 'log' | 'metrics' | 'pool'>> & FeedbackWriterOptions;
  #queue: Pending[] = [];
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;

  constructor(o: FeedbackWriterOptions) {
    this.#o = { maxItems: 500, maxDelayMs: 5, maxQueued: 50_000, ...o };
  }

  #rematchTimer: NodeJS.Timeout | undefined;
  #rematching: Promise<unknown> | undefined;

  /** Runs {@link rematch} every `intervalMs` for events younger than `withinMs`. */
  startRematching(intervalMs: number, withinMs: number): void {
    if (this.#rematchTimer) return;
    this.#rematchTimer = setInterval(() => {
      if (this.#rematching) return;
      this.#rematching = this.rematch(withinMs)
        .catch((err: unknown) => this.#o.log.warn({ err }, 'matching provider events again failed'))
        .finally(() => (this.#rematching = undefined));
    }, intervalMs);
    this.#rematchTimer.unref();
  }

  /** Stops the rematching and waits for what is being written. */
  async close(): Promise<void> {
    if (this.#rematchTimer) clearInterval(this.#rematchTimer);
    this.#rematchTimer = undefined;
    await this.#rematching;
    await this.drain();
  }

  /** Events waiting for a batch (tests and the flood bench read it). */
  get queued(): number {
    return this.#queue.length;
  }

  /** Records and applies one event; resolves once its batch has committed. */
  submit(event: FeedbackEvent): Promise<EventResult> {
    if (this.#queue.length >= this.#o.maxQueued) {
      this.#o.metrics.webhookRejected(event.provider, 'overloaded');
      return Promise.reject(new PlatformError('unavailable', { detail: 'too many provider events waiting; retry later' }));
    }
    return new Promise((resolve, reject) => {
      this.#queue.push({ event, resolve, reject });
      this.#schedule();
    });
  }

  /** Resolves when everything submitted so far is written. */
  async drain(): Promise<void> {
    while (this.#queue.length > 0 || this.#writing) {
      if (this.#writing) await this.#writing.catch(() => {});
      else this.#flush();
    }
  }

  #schedule(): void {
    if (this.#writing) return; // the running batch takes the next one when it ends
    if (this.#queue.length >= this.#o.maxItems) return this.#flush();
    this.#timer ??= setTimeout(() => this.#flush(), this.#o.maxDelayMs);
  }

  #flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#writing || this.#queue.length === 0) return;
    const batch = this.#queue.splice(0, this.#o.maxItems);
    this.#writing = this.#write(batch)
      .then(
        (results) => batch.forEach((p, i) => p.resolve(results[i]!)),
        (err: unknown) => {
          this.#o.log.warn({ err, events: batch.length }, 'writing provider feedback failed');
          for (const p of batch) p.reject(err);
        },
      )
      .finally(() => {
        this.#writing = undefined;
        if (this.#queue.length > 0) this.#schedule();
      });
  }

  async #write(batch: Pending[]): Promise<EventResult[]> {
    const { metrics } = this.#o;
    const results: EventResult[] = new Array<EventResult>(batch.length).fill('duplicate');
    // The first of a key in the batch is the event; a later one is its replay.
    const firstOf = new Map<string, number>();
    batch.forEach((p, i) => {
      const k = `${p.event.provider}\0${p.event.eventKey}`;
      if (!firstOf.has(k)) firstOf.set(k, i);
    });
    // Inserted in key order, so two replicas' batches holding the same keys wait on each other
    // rather than deadlock; applied below in order of arrival.
    const fresh = [...firstOf.values()].map((i) => ({ i, e: batch[i]!.event }));
    const byKey = [...fresh].sort((a, b) => {
      const ka = `${a.e.provider}\0${a.e.eventKey}`;
      const kb = `${b.e.provider}\0${b.e.eventKey}`;
      return ka < kb ? -1 : ka > kb ? 1 : 0;
    });
    await withTransaction(this.#o.pool, async (client) => {
      const { rows } = await client.query<{ id: string; provider: string; event_key: string }>(
        `INSERT INTO provider_events (provider, event_key, provider_message_id, kind, provider_type, error_code, detail, result, suppress)
         SELECT p, k, m, kd, t, c, dt, 'unknown', s::jsonb
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
                AS v (p, k, m, kd, t, c, dt, s)
         ON CONFLICT (provider, event_key) DO NOTHING
         RETURNING id::text, provider, event_key`,
        [
          byKey.map((f) => f.e.provider),
          byKey.map((f) => f.e.eventKey),
          byKey.map((f) => f.e.providerMessageId),
          byKey.map((f) => f.e.kind),
          byKey.map((f) => f.e.providerType.slice(0, 64)),
          byKey.map((f) => f.e.errorCode ?? null),
          byKey.map((f) => f.e.detail?.slice(0, 500) ?? null),
          byKey.map((f) => (f.e.suppress.length > 0 ? JSON.stringify(f.e.suppress) : null)),
        ],
      );
      const rowOf = new Map(rows.map((r) => [`${r.provider}\0${r.event_key}`, r.id]));
      const stored: (Stored & { i: number })[] = [];
      for (const f of fresh) {
        const rowId = rowOf.get(`${f.e.provider}\0${f.e.eventKey}`);
        if (rowId !== undefined) stored.push({ i: f.i, rowId, event: f.e });
      }
      const applied = await applyEvents(client, stored);
      const suppress: (Suppress & { provider: string; deliveryId: string | null })[] = [];
      stored.forEach((s, k) => {
        results[s.i] = applied[k]!.result;
        const e = batch[s.i]!.event;
        const deliveryId = applied[k]!.deliveryId;
        // Only for one of our deliveries; an unknown event's addresses wait with it (rematch).
        if (deliveryId !== null) for (const x of e.suppress) suppress.push({ ...x, provider: e.provider, deliveryId });
      });
      for (const reason of await addSuppressions(client, suppress)) metrics.suppressionAdded(reason);
    });
    batch.forEach((p, i) => {
      metrics.webhookEvent(p.event.provider, p.event.kind, results[i]!);
      if (results[i] === 'unknown') metrics.unknownMessage(p.event.provider);
    });
    return results;
  }

  /**
   * Matches stored events no delivery carried when they arrived (their `sent` was not recorded
   * yet, or a replica raced) and applies them, for events younger than `withinMs`: the state
   * change, and the suppressions that waited with the event. Any replica may run it; rows another
   * holds are skipped. Returns how many were matched.
   */
  async rematch(withinMs: number, limit = 1000): Promise<number> {
    return withTransaction(this.#o.pool, async (client) => {
      const { rows } = await client.query<{
        id: string;
        provider: FeedbackProvider;
        provider_message_id: string;
        kind: FeedbackKind;
        error_code: string | null;
        detail: string | null;
        suppress: Suppress[] | null;
      }>(
        `SELECT e.id::text, e.provider, e.provider_message_id, e.kind, e.error_code, e.detail, e.suppress
           FROM provider_events e
          WHERE e.delivery_id IS NULL AND e.received_at > now() - make_interval(secs => $1::double precision / 1000)
            AND EXISTS (SELECT 1 FROM deliveries d WHERE d.provider_message_id = e.provider_message_id)
          ORDER BY e.id LIMIT $2
          FOR UPDATE OF e SKIP LOCKED`,
        [withinMs, limit],
      );
      if (rows.length === 0) return 0;
      const stored: Stored[] = rows.map((r) => {
        const event: Stored['event'] = {
          channel: r.provider === 'ses' ? 'email' : 'sms',
          providerMessageId: r.provider_message_id,
          kind: r.kind,
        };
        if (r.error_code !== null) event.errorCode = r.error_code;
        if (r.detail !== null) event.detail = r.detail;
        return { rowId: r.id, event };
      });
      const results = await applyEvents(client, stored);
      const suppress: (Suppress & { provider: string; deliveryId: string | null })[] = [];
      rows.forEach((r, k) => {
        const { deliveryId } = results[k]!;
        if (deliveryId === null) return;
        this.#o.metrics.webhookEvent(r.provider, r.kind, 'matched_late');
        for (const x of r.suppress ?? []) suppress.push({ address: x.address, reason: x.reason, provider: r.provider, deliveryId });
      });
      for (const reason of await addSuppressions(client, suppress)) this.#o.metrics.suppressionAdded(reason);
      return results.filter((r) => r.result !== 'unknown').length;
    });
  }
}

/** The status a move to `to` leaves as the delivery's last error (the status view's reason). */
function reasonOf(to: FeedbackState, e: Stored['event']): string | null {
  if (to === 'delivered') return null;
  return e.detail ? `${to}: ${e.detail}` : to;
}

/**
 * Applies stored events (in the given order) to the deliveries they name; marks each event row
 * with its delivery and result. Returns each event's result.
 */
export async function applyEvents(
  client: PoolClient,
  stored: readonly Stored[],
): Promise<{ result: EventResult; deliveryId: string | null }[]> {
  if (stored.length === 0) return [];
  const { rows } = await client.query<{ id: string; channel: string; pmid: string; status: DeliveryStatus }>(
    `SELECT id::text, channel, provider_message_id AS pmid, status FROM deliveries
      WHERE provider_message_id = ANY($1::text[]) ORDER BY id FOR UPDATE`,
    [[...new Set(stored.map((s) => s.event.providerMessageId))]],
  );
  const byKey = new Map<string, { id: string; from: DeliveryStatus; status: DeliveryStatus; change?: Change }>();
  for (const r of rows) {
    const k = `${r.channel}\0${r.pmid}`;
    if (!byKey.has(k)) byKey.set(k, { id: r.id, from: r.status, status: r.status });
  }
  const marks: { rowId: string; deliveryId: string | null; result: EventResult }[] = [];
  for (const s of stored) {
    const d = byKey.get(`${s.event.channel}\0${s.event.providerMessageId}`);
    let result: EventResult;
    if (!d) result = 'unknown';
    else {
      const to = targetState(s.event.kind);
      if (to !== undefined && canApplyFeedback(d.status, to)) {
        d.status = to;
        d.change = { to, errorCode: s.event.errorCode ?? d.change?.errorCode ?? null, reason: reasonOf(to, s.event) };
        result = 'moved';
      } else {
        // Kept even when nothing moves: the status view shows the carrier's code of a late failure.
        if (s.event.errorCode !== undefined && d.change === undefined)
          d.change = { to: undefined, errorCode: s.event.errorCode, reason: null };
        result = 'recorded';
      }
    }
    marks.push({ rowId: s.rowId, deliveryId: d?.id ?? null, result });
  }
  const changed = [...byKey.values()].filter((d) => d.change !== undefined);
  if (changed.length > 0) {
    await client.query(
      `UPDATE deliveries d
          SET status = v.status,
              provider_error_code = coalesce(v.code, d.provider_error_code),
              last_error = CASE WHEN v.moved THEN v.reason ELSE d.last_error END,
              delivered_at = CASE WHEN v.status = 'delivered' THEN coalesce(d.delivered_at, now()) ELSE d.delivered_at END,
              failed_at = CASE WHEN v.moved AND v.status IN ('bounced', 'complained', 'undelivered', 'failed') THEN now() ELSE d.failed_at END,
              feedback_at = CASE WHEN v.moved THEN now() ELSE d.feedback_at END,
              updated_at = now()
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bool[], $6::text[]) AS v (id, status, code, reason, moved, was)
        WHERE d.id = v.id AND d.status = v.was`,
      [
        changed.map((d) => d.id),
        changed.map((d) => d.status),
        changed.map((d) => d.change!.errorCode),
        changed.map((d) => d.change!.reason),
        changed.map((d) => d.change!.to !== undefined),
        changed.map((d) => d.from),
      ],
    );
  }
  // Matched: the addresses it suppresses are applied by the caller, in this transaction.
  await client.query(
    `UPDATE provider_events e SET delivery_id = v.d, result = v.r, suppress = CASE WHEN v.d IS NULL THEN e.suppress END
       FROM unnest($1::bigint[], $2::uuid[], $3::text[]) AS v (id, d, r) WHERE e.id = v.id`,
    [marks.map((m) => m.rowId), marks.map((m) => m.deliveryId), marks.map((m) => m.result)],
  );
  return marks.map((m) => ({ result: m.result, deliveryId: m.deliveryId }));
}

interface Change {
  /** Undefined: no move, only the provider's error code kept. */
  to: FeedbackState | undefined;
  errorCode: string | null;
  reason: string | null;
}

/** Puts addresses on the suppression list (the first reason stays); returns the reasons of those added. */
async function addSuppressions(
  client: PoolClient,
  items: readonly (Suppress & { provider: string; deliveryId: string | null })[],
): Promise<Suppress['reason'][]> {
  if (items.length === 0) return [];
  const seen = new Map<string, Suppress & { provider: string; deliveryId: string | null }>();
  for (const s of items) if (!seen.has(s.address)) seen.set(s.address, s);
  const list = [...seen.values()].sort((a, b) => (a.address < b.address ? -1 : 1));
  const { rows } = await client.query<{ reason: Suppress['reason'] }>(
    `INSERT INTO email_suppressions (address, reason, detail, provider, delivery_id)
     SELECT a, r, CASE r WHEN 'bounce' THEN 'a permanent bounce' ELSE 'a complaint' END, p, d
       FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[]) AS v (a, r, p, d)
     ON CONFLICT (address) DO NOTHING
     RETURNING reason`,
    [list.map((s) => s.address), list.map((s) => s.reason), list.map((s) => s.provider), list.map((s) => s.deliveryId)],
  );
  return rows.map((r) => r.reason);
}
