-- Policies (notifier/policy, notifier/preferences): notification types, per-user preferences,
-- quiet-hour holds, caps and digests. What each column means for a delivery's state:
-- notifier/tracking/states.ts and notifier/README.md, "Delivery states".

-- The type a notification was classified as at ingestion (notifier/policy/types.ts). NULL only
-- for rows older than this migration, which are treated as the catalogue's fallback type.
ALTER TABLE notifications ADD COLUMN notification_type text;
ALTER TABLE deliveries ADD COLUMN notification_type text;

-- `single`: one notification to one channel; `digest`: the one send that carries a digest's items.
ALTER TABLE deliveries ADD COLUMN kind text NOT NULL DEFAULT 'single' CHECK (kind IN ('single', 'digest'));
-- A `queued` delivery that a policy holds until next_attempt_at, and why.
ALTER TABLE deliveries ADD COLUMN hold_reason text CHECK (hold_reason IN ('quiet_hours', 'digest', 'preferences_unavailable'));
-- When this send was counted against its (user, type, channel) cap: the cap's sliding window is
-- the set of these timestamps.
ALTER TABLE deliveries ADD COLUMN counted_at timestamptz;
-- An item (status `digested`) or the send (kind `digest`) of a digest.
ALTER TABLE deliveries ADD COLUMN digest_id uuid;

-- Suppressed (`opted_out`, `capped`) and folded into a digest (`digested`).
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (status IN (
  'queued', 'sending', 'sent', 'delivered', 'opened', 'read', 'failed', 'dead_lettered',
  'opted_out', 'capped', 'digested'));

CREATE INDEX deliveries_cap_window ON deliveries (recipient_id, notification_type, channel, counted_at)
  WHERE counted_at IS NOT NULL;
CREATE INDEX deliveries_digest ON deliveries (digest_id) WHERE digest_id IS NOT NULL;
-- A preference write waits for the user's sends in flight (notifier/preferences/store.ts).
CREATE INDEX deliveries_sending_recipient ON deliveries (recipient_id) WHERE status = 'sending';

-- PATCH /api/v1/users/{user_id}/preferences: what the user set, validated
-- (notifier/preferences/document.ts): {"types": {"<type>": {"<channel>": bool}}, "quiet_hours": {"start", "end"}}.
CREATE TABLE user_preferences (
  user_id    text        PRIMARY KEY,
  prefs      jsonb       NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- A digest: the held sends of one (user, type, channel) between its opening and its flush. At
-- most one is open per key; the flush closes it (under its row lock, so a join either lands
-- before the close or opens the next digest).
CREATE TABLE digests (
  id                uuid        PRIMARY KEY,
  user_id           text        NOT NULL,
  notification_type text        NOT NULL,
  channel           text        NOT NULL,
  status            text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
  -- The digest's send (deliveries.kind = 'digest').
  delivery_id       uuid        NOT NULL,
  opened_at         timestamptz NOT NULL DEFAULT now(),
  closed_at         timestamptz,
  items             integer
);
CREATE UNIQUE INDEX digests_open ON digests (user_id, notification_type, channel) WHERE status = 'open';
CREATE INDEX digests_opened_at ON digests (opened_at);
