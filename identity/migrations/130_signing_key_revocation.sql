-- Emergency revocation of a signing key (issue item 14). A revoked key leaves the JWKS at once and
-- never signs again; its row stays as the record of what was revoked, when and why, but its private
-- key is wiped: nothing may sign with it, so nothing keeps it. Rows with revoked_at set are not
-- part of the rotation schedule any more (identity/keys/key-store.ts reads only unrevoked keys).
ALTER TABLE signing_keys ADD COLUMN revoked_at timestamptz;
ALTER TABLE signing_keys ADD COLUMN revoked_reason text;
ALTER TABLE signing_keys ALTER COLUMN private_pkcs8 DROP NOT NULL;
ALTER TABLE signing_keys ADD CONSTRAINT signing_keys_private_until_revoked
  CHECK ((revoked_at IS NULL) = (private_pkcs8 IS NOT NULL));
