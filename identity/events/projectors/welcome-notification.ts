/**
 * A side effect, not a read model: on UserRegistered, queue a welcome notification for the
 * notifier (a row in `notification_outbox`). Guarded by `side_effects_done` on the event id
 * (side-effects.ts), in the same transaction as the outbox row, so a replay, a rebuild of this
 * consumer or a re-driven dead letter never queues a second welcome.
 */
import { claimSideEffects } from '../side-effects.js';
import { entityId, str, type Projector } from '../projector.js';

export const WELCOME_EFFECT = 'welcome_notification';

export const welcomeNotificationProjector: Projector = {
  name: 'welcome_notification',
  version: 1,
  eventTypes: new Set(['UserRegistered']),
  tables: [],
  async createTables() {},
  views: () => [],

  async apply(client, events) {
    const claimed = await claimSideEffects(
      client,
      WELCOME_EFFECT,
      events.map((e) => e.eventId),
    );
    const due = events.filter((e) => claimed.has(e.eventId));
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
