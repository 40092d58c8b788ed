-- Push device tokens (notifier/devices). A token identifies one app install, so it belongs to one
-- user at a time: registering it for another user moves it. A push send goes to every token of
-- the user; a token the provider reports as unregistered is deleted.
CREATE TABLE device_tokens (
  token      text        PRIMARY KEY,
  user_id    text        NOT NULL,
  platform   text        NOT NULL CHECK (platform IN ('ios', 'android', 'web')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX device_tokens_user ON device_tokens (user_id, updated_at DESC);
