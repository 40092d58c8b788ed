-- Provider feedback (issue 15): e-mail events (SES through SNS) and SMS status callbacks
-- (Twilio), and the e-mail suppression list (notifier/feedback).

-- The states provider feedback moves a delivery into (notifier/tracking/states.ts), and
-- `suppressed`: an e-mail never sent because its address is on the suppression list.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (status IN (
  'queued', 'sending', 'sent', 'delivered', 'opened', 'read', 'failed', 'dead_lettered',
  'opted_out', 'capped', 'digested', 'cancelled',
  'bounced', 'complained', 'undelivered', 'suppressed'));
-- The provider's own error code from its feedback (Twilio ErrorCode, SES bounce status), kept.
ALTER TABLE deliveries ADD COLUMN provider_error_code text;
-- When the provider's feedback last moved the delivery.
ALTER TABLE deliveries ADD COLUMN feedback_at timestamptz;
-- Feedback joins on the provider's message id (SES mail.messageId, Twilio MessageSid).
CREATE INDEX deliveries_provider_message ON deliveries (provider_message_id) WHERE provider_message_id IS NOT NULL;

-- Every signed event received, once: (provider, event_key) is SNS's MessageId or a hash of a
-- Twilio callback's (MessageSid, MessageStatus, ErrorCode), so a replay is found and changes
-- nothing. `delivery_id` is NULL while no delivery carries `provider_message_id` (an unknown
-- message, or one whose `sent` is not recorded yet: matched again later, feedback/matcher.ts).
CREATE TABLE provider_events (
  id                  bigserial   PRIMARY KEY,
  provider            text        NOT NULL,
  event_key           text        NOT NULL,
  provider_message_id text        NOT NULL,
  -- delivered, bounce_permanent, bounce_transient, complaint, undelivered, failed, progress, other
  kind                text        NOT NULL,
  -- The provider's name for it (SES eventType, Twilio MessageStatus).
  provider_type       text        NOT NULL,
  error_code          text,
  detail              text,
  delivery_id         uuid,
  -- moved, recorded (no state change), unknown
  result              text        NOT NULL,
  received_at         timestamptz NOT NULL DEFAULT now(),
  UNIQUE (provider, event_key)
);
CREATE INDEX provider_events_unmatched ON provider_events (received_at) WHERE delivery_id IS NULL;
CREATE INDEX provider_events_received_at ON provider_events (received_at);
CREATE INDEX provider_events_delivery ON provider_events (delivery_id) WHERE delivery_id IS NOT NULL;

-- Addresses e-mail is no longer sent to: a permanent bounce or a complaint put them here;
-- an operator removes them (DELETE /api/v1/admin/suppressions/{address}).
CREATE TABLE email_suppressions (
  address     text        PRIMARY KEY CHECK (address = lower(address)),
  reason      text        NOT NULL CHECK (reason IN ('bounce', 'complaint')),
  detail      text,
  provider    text        NOT NULL,
  delivery_id uuid,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_suppressions_created ON email_suppressions (created_at, address);
