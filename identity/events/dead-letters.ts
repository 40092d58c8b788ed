/**
 * Dead letters: the events a projector gave up on (consumer.ts). After the projector (or the data
 * it depends on, or the upcaster that reads a badly stored payload) is fixed, an operator re-drives
 * them: each open dead letter of the live generation goes through the same payload check as on the
 * live path (payload-check.ts) and is applied again, under the projector's live lock, in a
 * savepoint of its own. One that now applies is marked `redriven`; one that is refused or fails
 * again stays `open` with its attempts raised and its error replaced, and whatever its apply had
 * written is rolled back. The answer counts only what was applied.
 *
 * A re-driven event is applied after events that came later in the log. The read models are built
 * for that: their handlers are idempotent and their merges do not depend on order (flags, highest
 * status, per-field versions), so the result is the one an in-order run would have given.
 *
 * Dead letters of a generation that has since been replaced by a rebuild are `superseded`: the
 * rebuild met those events again.
 */
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import { isPoisonError } from './consumer.js';
import type { EventStore, RecordedEvent } from './event-store.js';
import type { EventMetrics } from './metrics.js';
import { payloadProblem } from './payload-check.js';
import { LOCK, LOCK_NS, lockKey } from './projection-sql.js';
import { projectionContext, type ProjectionContext, type Projector } from './projector.js';

export interface DeadLetter {
  id: number;
  projector: string;
  generation: number;
  position: number;
  eventId: string;
  eventType: string;
  attempts: number;
  error: string;
  failedAt: string;
  status: 'open' | 'redriven' | 'superseded';
}

export interface DeadLetterFilter {
  projector?: string;
  status?: DeadLetter['status'];
  /** Only these ids. */
  ids?: readonly number[];
  limit?: number;
}

interface Row {
  id: string;
  projector: string;
  generation: number;
  position: string;
  event_id: string;
  event_type: string;
  attempts: number;
  error: string;
  failed_at: Date;
  status: DeadLetter['status'];
}

const toDeadLetter = (r: Row): DeadLetter => ({
  id: Number(r.id),
  projector: r.projector,
  generation: r.generation,
  position: Number(r.position),
  eventId: r.event_id,
  eventType: r.event_type,
  attempts: r.attempts,
  error: r.error,
  failedAt: r.failed_at.toISOString(),
  status: r.status,
});

export async function listDeadLetters(pool: pg.Pool, filter: DeadLetterFilter = {}): Promise<DeadLetter[]> {
  const { rows } = await pool.query<Row>(
    `SELECT id, projector, generation, position, event_id, event_type, attempts, error, failed_at, status
       FROM projection_dead_letters
      WHERE ($1::text IS NULL OR projector = $1) AND ($2::text IS NULL OR status = $2) AND ($3::bigint[] IS NULL OR id = ANY ($3))
      ORDER BY id LIMIT $4`,
    [filter.projector ?? null, filter.status ?? null, filter.ids ? [...filter.ids] : null, Math.min(filter.limit ?? 100, 1000)],
  );
  return rows.map(toDeadLetter);
}

export interface RedriveDeps {
  pool: pg.Pool;
  store: EventStore;
  projectors: readonly Projector[];
  clock: Clock;
  log: Logger;
  metrics?: EventMetrics;
}

export interface RedriveResult {
  /** Dead letters applied now (marked `redriven`). */
  redriven: number;
  /** Dead letters refused or failed again (still open, attempts raised, nothing written). */
  failed: number;
  /** Open dead letters left by the filter's projectors. */
  remaining: number;
}

/**
 * Re-drives the open dead letters matching `filter` (default: every projector's). Each projector's
 * batch runs in one transaction holding its live lock.
 */
export async function redriveDeadLetters(deps: RedriveDeps, filter: Omit<DeadLetterFilter, 'status'> = {}): Promise<RedriveResult> {
  const out: RedriveResult = { redriven: 0, failed: 0, remaining: 0 };
  for (const p of deps.projectors) {
    if (filter.projector !== undefined && filter.projector !== p.name) continue;
    const client = await deps.pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN');
      await client.query({ ...LOCK, values: [LOCK_NS, lockKey(p.name, 'live')] });
      const { rows: gen } = await client.query<{ live_generation: number }>(
        'SELECT live_generation FROM projections WHERE projector = $1',
        [p.name],
      );
      const generation = gen[0]?.live_generation;
      if (generation !== undefined) {
        const { rows } = await client.query<Row>(
          `SELECT id, projector, generation, position, event_id, event_type, attempts, error, failed_at, status
             FROM projection_dead_letters
            WHERE projector = $1 AND generation = $2 AND status = 'open' AND ($3::bigint[] IS NULL OR id = ANY ($3))
            ORDER BY position LIMIT $4 FOR UPDATE`,
          [p.name, generation, filter.ids ? [...filter.ids] : null, Math.min(filter.limit ?? 1000, 10_000)],
        );
        const letters = rows.map(toDeadLetter);
        const events = new Map(
          (
            await deps.store.readPositions(
              letters.map((l) => l.position),
              client,
            )
          ).map((e) => [e.position, e]),
        );
        const ctx = projectionContext(generation, deps.clock.now(), deps.log);
        for (const letter of letters) {
          const event = events.get(letter.position);
          // Refused before the projector sees it, exactly as on the live path.
          let failure: { message: string; err?: unknown } | undefined;
          if (event === undefined) failure = { message: `event at position ${letter.position} is missing from the log` };
          else {
            const problem = payloadProblem(event, deps.store.catalog);
            if (problem !== undefined) failure = { message: problem };
            else failure = await applyInSavepoint(client, p, event, ctx);
          }
          if (failure === undefined) {
            await client.query(`UPDATE projection_dead_letters SET status = 'redriven', resolved_at = now() WHERE id = $1`, [letter.id]);
            out.redriven++;
            deps.metrics?.redriven.inc({ projector: p.name, outcome: 'applied' });
            deps.log.info({ projector: p.name, dead_letter: letter.id, event_id: letter.eventId }, 'dead letter re-driven');
          } else {
            await client.query('UPDATE projection_dead_letters SET attempts = attempts + 1, error = $2, failed_at = now() WHERE id = $1', [
              letter.id,
              failure.message.slice(0, 2000),
            ]);
            out.failed++;
            deps.metrics?.redriven.inc({ projector: p.name, outcome: 'failed' });
            deps.log.warn(
              { err: failure.err ?? failure.message, projector: p.name, dead_letter: letter.id, event_id: letter.eventId },
              'dead letter failed again',
            );
          }
        }
        const { rows: left } = await client.query<{ n: string }>(
          `SELECT count(*) AS n FROM projection_dead_letters WHERE projector = $1 AND status = 'open'`,
          [p.name],
        );
        out.remaining += Number(left[0]?.n ?? 0);
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => (broken = true));
      throw err;
    } finally {
      client.release(broken);
    }
  }
  return out;
}

/**
 * Applies one event in a savepoint: undefined when it applied, else the failure, with everything
 * the apply wrote rolled back. An error that is not the event's fault is thrown (the caller rolls
 * the whole re-drive back).
 */
async function applyInSavepoint(
  client: pg.PoolClient,
  p: Projector,
  event: RecordedEvent,
  ctx: ProjectionContext,
): Promise<{ message: string; err: unknown } | undefined> {
  await client.query('SAVEPOINT redrive');
  try {
    await p.apply(client, [event], ctx);
    await client.query('RELEASE SAVEPOINT redrive');
    return undefined;
  } catch (err) {
    await client.query('ROLLBACK TO SAVEPOINT redrive');
    if (!isPoisonError(err)) throw err;
    return { message: err instanceof Error ? err.message : String(err), err };
  }
}
