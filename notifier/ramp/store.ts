/**
 * The stored ramp settings (migration 110_provider_ramp.sql): read them, change one channel's
 * with its audit row and a NOTIFY in one transaction, list the changes.
 */
import { withTransaction, type Pool } from '../../shared/db.js';
import { NO_RAMP, type RampSettings } from './choice.js';

/** NOTIFY channel of ramp changes; the payload is the channel name. */
export const RAMP_CHANNEL = 'notifier_provider_ramp';

/** The channels a provider can be ramped on. */
export type RampChannel = 'push' | 'email' | 'sms';
export const RAMP_CHANNELS: readonly RampChannel[] = ['push', 'email', 'sms'];

export interface StoredRamp extends RampSettings {
  updatedBy: string | null;
  /** Epoch ms; null before any change. */
  updatedAt: number | null;
}

export interface RampChange extends RampSettings {
  id: number;
  channel: RampChannel;
  previousWeight: number;
  previousShadow: number;
  changedBy: string;
  /** Epoch ms. */
  changedAt: number;
}

/** Every channel's settings (a channel never changed has {@link NO_RAMP}). */
export async function loadRamps(pool: Pool): Promise<Map<RampChannel, StoredRamp>> {
  const { rows } = await pool.query<{ channel: RampChannel; weight: number; shadow: number; updated_by: string; updated_at: Date }>(
    'SELECT channel, weight, shadow, updated_by, updated_at FROM provider_ramps',
  );
  const out = new Map<RampChannel, StoredRamp>(RAMP_CHANNELS.map((c) => [c, { ...NO_RAMP, updatedBy: null, updatedAt: null }]));
  for (const r of rows) {
    out.set(r.channel, { weight: r.weight, shadow: r.shadow, updatedBy: r.updated_by, updatedAt: r.updated_at.getTime() });
  }
  return out;
}

/** Sets one channel's settings, records the change and tells every replica; returns what was stored. */
export async function saveRamp(pool: Pool, channel: RampChannel, s: RampSettings, by: string): Promise<StoredRamp> {
  return withTransaction(pool, async (client) => {
    // The row is locked for the change, so two operators' changes are audited in the order they apply.
    const before = await client.query<{ weight: number; shadow: number }>(
      'SELECT weight, shadow FROM provider_ramps WHERE channel = $1 FOR UPDATE',
      [channel],
    );
    const prev = before.rows[0] ?? NO_RAMP;
    const { rows } = await client.query<{ updated_at: Date }>(
      `INSERT INTO provider_ramps (channel, weight, shadow, updated_by) VALUES ($1, $2, $3, $4)
       ON CONFLICT (channel) DO UPDATE SET weight = $2, shadow = $3, updated_by = $4, updated_at = now()
       RETURNING updated_at`,
      [channel, s.weight, s.shadow, by],
    );
    await client.query(
      `INSERT INTO provider_ramp_changes (channel, weight, shadow, previous_weight, previous_shadow, changed_by)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [channel, s.weight, s.shadow, prev.weight, prev.shadow, by],
    );
    await client.query('SELECT pg_notify($1, $2)', [RAMP_CHANNEL, channel]);
    return { weight: s.weight, shadow: s.shadow, updatedBy: by, updatedAt: rows[0]!.updated_at.getTime() };
  });
}

/** The latest changes of a channel, newest first. */
export async function listRampChanges(pool: Pool, channel: RampChannel, limit: number): Promise<RampChange[]> {
  const { rows } = await pool.query<{
    id: string;
    weight: number;
    shadow: number;
    previous_weight: number;
    previous_shadow: number;
    changed_by: string;
    changed_at: Date;
  }>(
    `SELECT id, weight, shadow, previous_weight, previous_shadow, changed_by, changed_at
       FROM provider_ramp_changes WHERE channel = $1 ORDER BY id DESC LIMIT $2`,
    [channel, limit],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    channel,
    weight: r.weight,
    shadow: r.shadow,
    previousWeight: r.previous_weight,
    previousShadow: r.previous_shadow,
    changedBy: r.changed_by,
    changedAt: r.changed_at.getTime(),
  }));
}
