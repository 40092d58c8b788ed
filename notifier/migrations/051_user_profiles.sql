-- Recipients' contact details (notifier/profiles), written by PUT /api/v1/users/{user_id}/profile.
-- Values are stored validated and canonical: email with a lower-case domain, phone in E.164,
-- locale as xx or xx_YY, timezone as the IANA name Intl resolves it to.
CREATE TABLE user_profiles (
  user_id    text        PRIMARY KEY,
  email      text,
  phone      text,
  locale     text,
  timezone   text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
