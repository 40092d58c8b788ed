/**
 * Side effects for the notifier, not a read model:
 *
 * - on UserRegistered, queue a welcome notification (a row in `notification_outbox`). Guarded by
 *   `side_effects_done` on the event id (side-effects.ts), in the same transaction as the outbox
 *   row, so a replay, a rebuild of this consumer or a re-driven dead letter never queues a second
 *   welcome;
 * - on UserRegistered and UserEmailUpdated, record the address the notifier should hold for the
 *   user (`notifier_profile_sync`, keyed by user, versioned by the user stream's version: the
 *   highest version wins, so a replay or a repeat changes nothing). The relay (identity/notify)
 *   pushes it to the notifier's recipient profile, and sends a user's outbox rows only once that
 *   user's profile is in step, so the welcome e-mail finds the address written with it.
 */
import { claimSideEffects } from '../side-effects.js';
import { entityId, str, type Projector } from '../projector.js';
import type { RecordedEvent } from '../event-store.js';

export const WELCOME_EFFECT = 'welcome_notification';

/** The address each user's latest event in `events` sets, with that event's stream version. */
export function profileChanges(events: readonly RecordedEvent[]): Map<string, { email: string; version: number }> {
  const out = new Map<string, { email: string; version: number }>();
  for (const e of events) {
    const email = e.type === 'UserRegistered' ? str(e.data.email) : e.type === 'UserEmailUpdated' ? str(e.data.new_email) : undefined;
    if (email === undefined || email.trim() === '') continue;
    const userId = entityId(e, 'user', 'user_id');
    const prev = out.get(userId);
    if (!prev || e.streamVersion > prev.version) out.set(userId, { email, version: e.streamVersion });
  }
  return out;
}

export const welcomeNotificationProjector: Projector = {
  name: 'welcome_notification',
  version: 1,
  eventTypes: new Set(['UserRegistered', 'UserEmailUpdated']),
  tables: [],
  async createTables() {},
  views: () => [],

  async apply(client, events) {
    const profiles = profileChanges(events);
    if (profiles.size > 0) {
      await client.query({
        text: `INSERT INTO notifier_profile_sync (user_id, email, version)
SELECT * FROM unnest($1::text[], $2::text[], $3::int[])
ON CONFLICT (user_id) DO UPDATE SET email = EXCLUDED.email, version = EXCLUDED.version, attempts = 0,
  next_attempt_at = now(), last_error = NULL, updated_at = now()
WHERE EXCLUDED.version > notifier_profile_sync.version`,
        values: [[...profiles.keys()], [...profiles.values()].map((p) => p.email), [...profiles.values()].map((p) => p.version)],
      });
    }
    const registered = events.filter((e) => e.type === 'UserRegistered');
    const claimed = await claimSideEffects(
      client,
      WELCOME_EFFECT,
      registered.map((e) => e.eventId),
    );
    const due = registered.filter((e) => claimed.has(e.eventId));
    if (due.length === 0) return;
    await client.query({
      text: `INSERT INTO notification_outbox (kind, user_id, event_id, payload)
SELECT 'welcome', * FROM unnest($1::text[], $2::uuid[], $3::jsonb[])`,
      values: [
        due.map((e) => entityId(e, 'user', 'user_id')),
        due.map((e) => e.eventId),
        due.map((e) =>
          JSON.stringify({ user_id: entityId(e, 'user', 'user_id'), email: str(e.data.email) ?? null, name: str(e.data.name) ?? null }),
        ),
      ],
    });
  },
};
