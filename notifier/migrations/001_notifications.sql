-- The notifier core: accepted notifications, the idempotency record of each caller's key, one
-- delivery record per (notification, channel, recipient), the dead-letter queue and the in-app
-- inbox. Queue jobs live in pg-boss's own schema (`pgboss`), written in the same transactions.

CREATE TABLE notifications (
  id              uuid        PRIMARY KEY,
  -- The subject that sent it (`key:<hash>`, `user:<id>`, `tenant:<id>`): idempotency keys are per caller.
  caller          text        NOT NULL,
  event_type      text        NOT NULL,
  recipient_id    text        NOT NULL,
  template_id     text        NOT NULL,
  template_data   jsonb       NOT NULL DEFAULT '{}'::jsonb,
  priority        text        NOT NULL CHECK (priority IN ('transactional', 'high', 'normal', 'low')),
  -- As requested; empty means "resolve" (push only until preferences exist).
  channels        text[]      NOT NULL DEFAULT '{}',
  locale          text,
  campaign_id     text,
  idempotency_key text,
  routed_at       timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_created_at ON notifications (created_at);

CREATE TABLE idempotency_keys (
  caller          text        NOT NULL,
  key             text        NOT NULL,
  -- sha256 of the canonical request; a repeat with another body is refused.
  body_hash       text        NOT NULL,
  notification_id uuid        NOT NULL,
  -- The 202 body, answered again to a repeat.
  response        jsonb       NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  PRIMARY KEY (caller, key)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);

CREATE TABLE deliveries (
  id                  uuid        PRIMARY KEY,
  notification_id     uuid        NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
  channel             text        NOT NULL CHECK (channel IN ('push', 'email', 'sms', 'in_app')),
  recipient_id        text        NOT NULL,
  priority            text        NOT NULL CHECK (priority IN ('transactional', 'high', 'normal', 'low')),
  template_id         text        NOT NULL,
  -- sha256 hex of (notification_id, channel, recipient_id): one delivery per triple, ever.
  idempotency_key     text        NOT NULL UNIQUE,
  -- `sending` is internal (shown as queued): claimed by a worker, provider call under way.
  status              text        NOT NULL DEFAULT 'queued'
                      CHECK (status IN ('queued', 'sending', 'sent', 'delivered', 'opened', 'read', 'failed', 'dead_lettered')),
  attempts            integer     NOT NULL DEFAULT 0,
  provider            text,
  provider_message_id text,
  -- After the retries on the primary provider: one attempt on the channel's secondary provider.
  use_secondary       boolean     NOT NULL DEFAULT false,
  -- Transactional push → sms: this delivery is parked while that one tries; it resumes if that fails.
  failed_over_to      uuid,
  last_error          text,
  next_attempt_at     timestamptz,
  sending_since       timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  sent_at             timestamptz,
  delivered_at        timestamptz,
  opened_at           timestamptz,
  read_at             timestamptz,
  failed_at           timestamptz
);
CREATE INDEX deliveries_notification ON deliveries (notification_id);
CREATE INDEX deliveries_created_at ON deliveries (created_at);
CREATE INDEX deliveries_failed_over_to ON deliveries (failed_over_to) WHERE failed_over_to IS NOT NULL;

-- The dead-letter queue: a delivery whose retries are exhausted (or that cannot render), by channel.
-- A re-drive sets redriven_at once (idempotent) and puts the delivery back on its queue; if it
-- fails again it gets a new row.
CREATE TABLE dead_letters (
  id           uuid        PRIMARY KEY,
  delivery_id  uuid        NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
  channel      text        NOT NULL,
  priority     text        NOT NULL,
  reason       text        NOT NULL,
  detail       text,
  attempts     integer     NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  redriven_at  timestamptz,
  redriven_by  text
);
CREATE INDEX dead_letters_open ON dead_letters (channel, created_at, id) WHERE redriven_at IS NULL;
CREATE INDEX dead_letters_created_at ON dead_letters (created_at, id);
CREATE INDEX dead_letters_delivery ON dead_letters (delivery_id);

-- The in-app inbox, written by the in_app channel (one item per delivery).
CREATE TABLE inbox_items (
  id              uuid        PRIMARY KEY,
  user_id         text        NOT NULL,
  delivery_id     uuid        UNIQUE,
  notification_id uuid        NOT NULL,
  event_type      text        NOT NULL,
  title           text,
  body            text        NOT NULL,
  data            jsonb       NOT NULL DEFAULT '{}'::jsonb,
  created_at      timestamptz NOT NULL DEFAULT now(),
  read_at         timestamptz
);
CREATE INDEX inbox_items_feed ON inbox_items (user_id, created_at DESC, id DESC);
CREATE INDEX inbox_items_unread ON inbox_items (user_id, created_at DESC, id DESC) WHERE read_at IS NULL;
CREATE INDEX inbox_items_created_at ON inbox_items (created_at);
