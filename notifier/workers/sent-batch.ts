/**
 * Recording `sent` for many deliveries at once. Under load most attempts end in `sent`, and each
 * would cost its own commit (an fsync) for the delivery row and another for its job; gathered for
 * a few milliseconds, one transaction records a batch of them and completes their jobs. A caller's
 * promise settles when its batch has committed (or failed: then its job is retried by pg-boss and
 * the claim finds the delivery `sending`, to be reconciled like a crash).
 */
import { withTransaction, type Pool } from '../../shared/db.js';
import { completeJobs, txDb, type Boss } from '../queues/boss.js';

export interface SentRecord {
  deliveryId: string;
  provider: string;
  providerMessageId: string;
  queue: string;
  jobId: string;
}

export interface SentBatchOptions {
  pool: Pool;
  boss: Boss;
  /** Longest a record waits for company, ms. */
  maxDelayMs: number;
  /** A batch this large is written at once. */
  maxItems: number;
}

interface Pending {
  record: SentRecord;
  resolve: (moved: boolean) => void;
  reject: (err: unknown) => void;
}

export class SentBatch {
  readonly #o: SentBatchOptions;
  #pending: Pending[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(opts: SentBatchOptions) {
    this.#o = opts;
  }

  /** Records one send; resolves true when this call moved the delivery `sending` → `sent`. */
  add(record: SentRecord): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ record, resolve, reject });
      if (this.#pending.length >= this.#o.maxItems) this.#flush();
      else this.#timer ??= setTimeout(() => this.#flush(), this.#o.maxDelayMs);
    });
  }

  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#pending;
    this.#pending = [];
    if (batch.length === 0) return;
    void this.#write(batch.map((p) => p.record)).then(
      (moved) => {
        for (const p of batch) p.resolve(moved.has(p.record.deliveryId));
      },
      (err: unknown) => {
        for (const p of batch) p.reject(err);
      },
    );
  }

  async #write(records: SentRecord[]): Promise<Set<string>> {
    const o = this.#o;
    // Row locks in id order, as the claims take them: no deadlock between the two.
    records.sort((a, b) => (a.deliveryId < b.deliveryId ? -1 : a.deliveryId > b.deliveryId ? 1 : 0));
    return withTransaction(o.pool, async (client) => {
      const { rows } = await client.query<{ id: string }>(
        `UPDATE deliveries d
            SET status = 'sent', sent_at = now(), provider = v.provider, provider_message_id = v.pmid,
                sending_since = NULL, last_error = NULL, next_attempt_at = NULL, updated_at = now()
           FROM unnest($1::uuid[], $2::text[], $3::text[]) AS v(id, provider, pmid)
          WHERE d.id = v.id AND d.status = 'sending'
          RETURNING d.id`,
        [records.map((r) => r.deliveryId), records.map((r) => r.provider), records.map((r) => r.providerMessageId)],
      );
      const byQueue = new Map<string, string[]>();
      for (const r of records) byQueue.set(r.queue, [...(byQueue.get(r.queue) ?? []), r.jobId]);
      for (const [queue, ids] of byQueue) await completeJobs(o.boss, queue, ids, txDb(client));
      return new Set(rows.map((r) => r.id));
    });
  }
}
