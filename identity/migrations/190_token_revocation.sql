-- Token revocation (RFC 7009, POST /revoke) and the revocation list the sidecars poll
-- (GET /.well-known/revoked-tokens.json; README, "Revocation and the edge").
--
-- A refresh token revokes its family: oauth_grants.revoked_at, already there. An access token
-- revokes itself: its jti is kept here until the token's own expiry (`expires_at` = its exp), after
-- which it is refused anyway and the row is purged.
CREATE TABLE revoked_access_tokens (
  jti        text        PRIMARY KEY,
  client_id  text        NOT NULL,
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz NOT NULL
);
CREATE INDEX revoked_access_tokens_expires_idx ON revoked_access_tokens (expires_at);

-- The list reads the families revoked within the last access-token lifetime.
CREATE INDEX oauth_grants_revoked_idx ON oauth_grants (revoked_at) WHERE revoked_at IS NOT NULL;
