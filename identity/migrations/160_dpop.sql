-- DPoP (RFC 9449, issue 16): sender-constrained tokens.
-- A client registered with dpop_bound_access_tokens (RFC 9449 §5.2) must present a DPoP proof at
-- the token endpoint. A grant issued to a public client with a proof is bound to that key: every
-- refresh of its family needs a proof made with the key whose RFC 7638 thumbprint is dpop_jkt.
ALTER TABLE oauth_clients ADD COLUMN dpop_bound_access_tokens boolean NOT NULL DEFAULT false;
ALTER TABLE oauth_grants ADD COLUMN dpop_jkt text;

-- The proofs identity accepted (token endpoint and userinfo), by SHA-256 of "<jkt>.<jti>", until
-- their iat leaves the acceptance window: a proof is used once across every replica. Rows past
-- expires_at are reclaimed by the next insert of the same key and deleted in passing.
CREATE TABLE dpop_proofs (
  proof_sha256 bytea       PRIMARY KEY,
  expires_at   timestamptz NOT NULL
);
CREATE INDEX dpop_proofs_expires_idx ON dpop_proofs (expires_at);

-- The secret of the server nonces (shared/dpop/nonce.ts), one per deployment, created by the first
-- replica that needs it, so every replica accepts every replica's nonces.
CREATE TABLE dpop_nonce_secret (
  id         smallint    PRIMARY KEY CHECK (id = 1),
  secret     bytea       NOT NULL CHECK (length(secret) >= 32),
  created_at timestamptz NOT NULL
);
