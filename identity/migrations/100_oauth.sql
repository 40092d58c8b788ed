-- The OAuth 2.0 / OpenID Connect authorization server (issue 6): signing keys, the client registry,
-- the sign-in credentials used until accounts (issue 6 item 1) take them over, authorization codes,
-- device codes, grants with their refresh-token families, and security events.
-- Every time here is written by the service from its injected clock, never by now(): the rotation
-- schedule and the token rules are tested with a fake clock.

-- Signing keys. A key is published (in the JWKS) from created_at, signs from activate_at (one JWKS
-- cache lifetime after it is published, so every verifier has it before the first token), and is
-- dropped at retire_at (its successor's activate_at plus the longest token lifetime). The private
-- key is PKCS#8 PEM; it is never logged and never leaves this table except to sign.
CREATE TABLE signing_keys (
  kid           text        PRIMARY KEY,
  alg           text        NOT NULL CHECK (alg IN ('ES256', 'RS256')),
  public_jwk    jsonb       NOT NULL,
  private_pkcs8 text        NOT NULL,
  created_at    timestamptz NOT NULL,
  activate_at   timestamptz NOT NULL,
  retire_at     timestamptz,
  CHECK (activate_at >= created_at),
  CHECK (retire_at IS NULL OR retire_at > activate_at)
);

-- Registered clients. Public clients (browser and native apps, devices) have no secret;
-- confidential ones have a server-generated 256-bit secret kept only as its SHA-256.
-- redirect_uris are compared as exact strings.
CREATE TABLE oauth_clients (
  client_id         text        PRIMARY KEY,
  client_type       text        NOT NULL CHECK (client_type IN ('public', 'confidential')),
  secret_sha256     bytea,
  name              text        NOT NULL,
  redirect_uris     text[]      NOT NULL DEFAULT '{}',
  grant_types       text[]      NOT NULL,
  scopes            text[]      NOT NULL,
  role              text        NOT NULL DEFAULT 'service',
  tenant_id         text,
  plan              text,
  created_at        timestamptz NOT NULL,
  secret_rotated_at timestamptz,
  CHECK ((client_type = 'confidential') = (secret_sha256 IS NOT NULL))
);

-- Sign-in credentials: secrets are not immutable facts, so they live outside the event log.
-- email is in normal form (trimmed, lower-case); password_hash is an argon2id PHC string.
CREATE TABLE credentials (
  user_id       text        PRIMARY KEY,
  email         text        NOT NULL UNIQUE,
  password_hash text        NOT NULL,
  role          text        NOT NULL DEFAULT 'customer' CHECK (role IN ('customer', 'support', 'admin')),
  name          text,
  updated_at    timestamptz NOT NULL DEFAULT now()
);

-- A grant: what one sign-in (authorization code or device approval) allowed one client. It is the
-- refresh-token family and the `sid` of the access tokens issued under it; revoking it ends every
-- refresh token of the family and makes its access tokens inactive at userinfo and introspection.
-- The grant's random key derives each successor refresh token from its parent (HMAC-SHA256), so a
-- retried rotation can be answered with the same successor without storing any token. The key is
-- kept as its two 64-byte HMAC pads, so the rotation statement computes the HMAC with sha256().
CREATE TABLE oauth_grants (
  grant_id       uuid        PRIMARY KEY,
  user_id        text        NOT NULL,
  client_id      text        NOT NULL,
  scope          text        NOT NULL,
  auth_time      timestamptz NOT NULL,
  created_at     timestamptz NOT NULL,
  rotation_ipad  bytea       NOT NULL,
  rotation_opad  bytea       NOT NULL,
  revoked_at     timestamptz,
  revoked_reason text
);

CREATE INDEX oauth_grants_user_idx ON oauth_grants (user_id);

-- Refresh tokens, by the SHA-256 of the token's 32 raw bytes. A token is current until
-- rotated_at; its one successor is successor_sha256.
CREATE TABLE refresh_tokens (
  token_sha256     bytea       PRIMARY KEY,
  grant_id         uuid        NOT NULL REFERENCES oauth_grants (grant_id) ON DELETE CASCADE,
  parent_sha256    bytea,
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,
  rotated_at       timestamptz,
  successor_sha256 bytea
);

CREATE INDEX refresh_tokens_grant_idx ON refresh_tokens (grant_id);
CREATE INDEX refresh_tokens_expires_idx ON refresh_tokens (expires_at);

-- Authorization codes, by the SHA-256 of the code; bound to the client, the redirect_uri and the
-- PKCE challenge. consumed_at marks the one redemption; grant_id is what it issued.
CREATE TABLE authorization_codes (
  code_sha256    bytea       PRIMARY KEY,
  client_id      text        NOT NULL,
  redirect_uri   text        NOT NULL,
  code_challenge text        NOT NULL,
  user_id        text        NOT NULL,
  scope          text        NOT NULL,
  nonce          text,
  auth_time      timestamptz NOT NULL,
  created_at     timestamptz NOT NULL,
  expires_at     timestamptz NOT NULL,
  consumed_at    timestamptz,
  grant_id       uuid
);

CREATE INDEX authorization_codes_expires_idx ON authorization_codes (expires_at);

-- Device authorization (RFC 8628). user_code is stored without its dash, upper-case.
CREATE TABLE device_codes (
  device_code_sha256 bytea       PRIMARY KEY,
  user_code          text        NOT NULL UNIQUE,
  client_id          text        NOT NULL,
  scope              text        NOT NULL,
  status             text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
  interval_s         integer     NOT NULL,
  created_at         timestamptz NOT NULL,
  expires_at         timestamptz NOT NULL,
  last_polled_at     timestamptz,
  user_id            text,
  auth_time          timestamptz,
  grant_id           uuid
);

CREATE INDEX device_codes_expires_idx ON device_codes (expires_at);

-- Security alerts (RefreshTokenReuseDetected, AuthorizationCodeReuseDetected), appended in the
-- transaction that revokes. data is the alert's JSON (proto identity.v1 where one exists).
CREATE TABLE security_events (
  id          bigserial   PRIMARY KEY,
  event_type  text        NOT NULL,
  user_id     text,
  client_id   text,
  grant_id    uuid,
  data        jsonb       NOT NULL,
  recorded_at timestamptz NOT NULL
);

CREATE INDEX security_events_user_idx ON security_events (user_id, recorded_at);
