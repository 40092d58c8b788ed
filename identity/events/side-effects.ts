/**
 * Side effects guarded by event id. A consumer that sends something (an email, a webhook) claims
 * `(effect, event_id)` in `side_effects_done` in the transaction that writes the effect's outbox
 * row; a replay, a rebuild or a re-drive that meets the same event finds the claim and does nothing.
 * The actual sending happens from the outbox, after commit, by whoever drains it (the notifier).
 */
import type { Queryable } from './event-store.js';

const CLAIM = {
  name: 'side_effects_claim',
  text: `INSERT INTO side_effects_done (effect, event_id) SELECT $1, unnest($2::uuid[])
ON CONFLICT (effect, event_id) DO NOTHING RETURNING event_id`,
};

/** Claims `effect` for each event id; returns the ids claimed now (the others were done before). */
export async function claimSideEffects(client: Queryable, effect: string, eventIds: readonly string[]): Promise<Set<string>> {
  if (eventIds.length === 0) return new Set();
  const { rows } = await client.query<{ event_id: string }>({ ...CLAIM, values: [effect, [...new Set(eventIds)]] });
  return new Set(rows.map((r) => r.event_id));
}
