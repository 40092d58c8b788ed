-- An operator can put an address on the e-mail suppression list by hand (POST
-- /api/v1/admin/suppressions, e.g. from the console): reason `manual`, provider `operator`.
ALTER TABLE email_suppressions DROP CONSTRAINT email_suppressions_reason_check;
ALTER TABLE email_suppressions ADD CONSTRAINT email_suppressions_reason_check CHECK (reason IN ('bounce', 'complaint', 'manual'));
