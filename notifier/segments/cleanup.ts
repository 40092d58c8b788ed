/**
 * The segment clean-up: deletes the members of list versions nobody can read any more, in batches.
 *
 * A version's members are kept while it is `live`, `uploading`, or pinned by an open fan-out
 * (campaign_fanouts in `planning`, `pending_approval` or `expanding` with that segment_version).
 * A pin is only ever taken on the live version, inside a transaction that holds the segment's row
 * FOR SHARE (loadSegment `lock`), and a switch takes that row FOR UPDATE: once a version is retired,
 * every pin it will ever have is committed, so a retired version seen unpinned here stays unpinned.
 * An `uploading` version whose writer stopped touching it (the process died) is abandoned first.
 *
 * Runs after every switch and failed upload (kicked, off the request path), at start and every
 * {@link CLEANUP_INTERVAL_MS} (a fan-out that finishes releases its version then); runs never
 * overlap within a process, and two replicas cleaning at once only delete the same rows twice.
 */
import type { Pool } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';

/** Members deleted per statement. */
export const PURGE_BATCH = 10_000;
/** How often the clean-up runs without being kicked. */
export const CLEANUP_INTERVAL_MS = 10 * 60_000;

export interface CleanupResult {
  /** Uploads abandoned because their writer stopped. */
  stale: number;
  /** Versions whose members were deleted. */
  versions: number;
  members: number;
}

/** One pass: abandons stale uploads, then purges every unpinned retired or abandoned version. */
export async function cleanUpSegments(pool: Pool, staleMs: number, batch = PURGE_BATCH): Promise<CleanupResult> {
  const stale = await pool.query(
    `UPDATE segment_versions SET state = 'abandoned'
      WHERE state = 'uploading' AND touched_at < now() - make_interval(secs => $1)`,
    [staleMs / 1000],
  );
  const { rows } = await pool.query<{ segment_id: string; version: number }>(
    `SELECT v.segment_id, v.version FROM segment_versions v
      WHERE v.state IN ('retired', 'abandoned') AND v.purged_at IS NULL
        AND NOT EXISTS (SELECT 1 FROM campaign_fanouts f
                         WHERE f.segment_id = v.segment_id AND f.segment_version = v.version
                           AND f.state IN ('planning', 'pending_approval', 'expanding'))
      ORDER BY v.segment_id, v.version`,
  );
  let members = 0;
  for (const v of rows) {
    for (;;) {
      const del = await pool.query(
        `DELETE FROM segment_members WHERE (segment_id, version, user_id) IN (
           SELECT segment_id, version, user_id FROM segment_members WHERE segment_id = $1 AND version = $2 LIMIT $3)`,
        [v.segment_id, v.version, batch],
      );
      members += del.rowCount ?? 0;
      if ((del.rowCount ?? 0) < batch) break;
    }
    await pool.query('UPDATE segment_versions SET purged_at = now() WHERE segment_id = $1 AND version = $2', [v.segment_id, v.version]);
  }
  return { stale: stale.rowCount ?? 0, versions: rows.length, members };
}

/** Runs {@link cleanUpSegments} when kicked and on an interval, one run at a time. */
export class SegmentCleanup {
  private running: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly o: { pool: Pool; log: Logger; staleMs: number; intervalMs?: number }) {}

  start(): void {
    this.kick();
    this.timer = setInterval(() => this.kick(), this.o.intervalMs ?? CLEANUP_INTERVAL_MS);
    this.timer.unref();
  }

  /** Asks for a run soon; a run in progress is followed by one more. */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          const r = await cleanUpSegments(this.o.pool, this.o.staleMs);
          if (r.versions > 0 || r.stale > 0) this.o.log.info({ ...r }, 'segments: old versions cleaned up');
        } catch (err) {
          this.o.log.warn({ err }, 'segments: clean-up failed; it runs again later');
        }
      } while (this.again && !this.stopped);
      this.running = undefined;
    })();
  }

  /** The current run, for tests: resolves when no run is in progress. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  /** Stops the interval and waits for a run in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.idle();
  }
}
