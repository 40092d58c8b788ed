-- The notification relay (identity/notify): drains notification_outbox to the notifier and keeps
-- the notifier's recipient profile in step with identity.
--
-- Outbox rows get a retry schedule and a parking place: a row is sent (sent_at) only after the
-- notifier answered 202; a failure that can succeed later moves next_attempt_at (backoff); a refusal
-- that never will (a 4xx about the row itself) parks it (parked_at, last_error) for an operator.
ALTER TABLE notification_outbox ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE notification_outbox ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE notification_outbox ADD COLUMN last_error text;
ALTER TABLE notification_outbox ADD COLUMN parked_at timestamptz;

-- The relay claims the oldest pending row of each user (a user's rows go out in order).
CREATE INDEX notification_outbox_pending_idx ON notification_outbox (user_id, id) WHERE sent_at IS NULL AND parked_at IS NULL;

-- The e-mail address identity wants the notifier to hold for each user: `version` is the user
-- stream's version of the event that set it (UserRegistered, UserEmailUpdated), `synced_version`
-- the last version the notifier accepted. State, not a queue: two changes before a sync collapse
-- into one PUT of the latest address, in any order of processing.
CREATE TABLE notifier_profile_sync (
  user_id         text        PRIMARY KEY,
  email           text        NOT NULL,
  version         integer     NOT NULL,
  synced_version  integer     NOT NULL DEFAULT 0,
  attempts        integer     NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error      text,
  -- the version the notifier refused for good; a later version is tried again
  parked_version  integer,
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX notifier_profile_sync_pending_idx ON notifier_profile_sync (next_attempt_at)
  WHERE synced_version < version;

-- Security alerts reach the user: every security_events row about a user (RefreshTokenReuseDetected,
-- AuthorizationCodeReuseDetected) queues an outbox row in the same transaction, so an alert is
-- durable exactly when its security event is; the code that detects reuse is unchanged.
CREATE FUNCTION notification_outbox_security_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.user_id IS NOT NULL THEN
    INSERT INTO notification_outbox (kind, user_id, event_id, payload)
    VALUES ('security_alert', NEW.user_id, gen_random_uuid(),
            jsonb_build_object('alert', NEW.event_type, 'user_id', NEW.user_id, 'client_id', NEW.client_id,
                               'security_event_id', NEW.id, 'at', extract(epoch FROM NEW.recorded_at)));
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER security_events_notify AFTER INSERT ON security_events
  FOR EACH ROW EXECUTE FUNCTION notification_outbox_security_event();

-- A password change: any change of a stored password hash (a reset, an operator re-seeding the
-- credentials, a future change-password endpoint) queues a PasswordChanged alert in the same
-- transaction. Creating credentials (signup) is an INSERT and raises nothing.
CREATE FUNCTION notification_outbox_password_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO notification_outbox (kind, user_id, event_id, payload)
  VALUES ('security_alert', NEW.user_id, gen_random_uuid(),
          jsonb_build_object('alert', 'PasswordChanged', 'user_id', NEW.user_id, 'at', extract(epoch FROM now())));
  RETURN NULL;
END $$;

CREATE TRIGGER credentials_password_changed AFTER UPDATE OF password_hash ON credentials
  FOR EACH ROW WHEN (OLD.password_hash IS DISTINCT FROM NEW.password_hash)
  EXECUTE FUNCTION notification_outbox_password_changed();
