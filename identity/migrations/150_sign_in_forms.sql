-- Anti-forgery tokens of the sign-in page (/authorize) and the device page (/auth/device)
-- (identity/oauth/form-token-store.ts). One row per page shown with a password form: the token the
-- page embeds, the browser it was shown to (the hash of that browser's form cookie) and what it
-- is for (the hash of the authorization request's parameters, or of the device's user code).
-- Only hashes are stored. A row is deleted when its form succeeds, and once it has expired.
CREATE TABLE sign_in_forms (
  token_sha256   bytea       PRIMARY KEY,
  browser_sha256 bytea       NOT NULL,
  subject_sha256 bytea       NOT NULL,
  expires_at     timestamptz NOT NULL
);
CREATE INDEX sign_in_forms_expires_idx ON sign_in_forms (expires_at);
