-- Templates (notifier/templates): one row per version, `<name>_v<N>`, and one row per locale
-- variant, `<template_id>.<locale>`, holding the source text of each channel's part as JSON.
-- `used_at` is set the first time a notification names the version; from then on the version and
-- its variants never change (the API answers 409).
CREATE TABLE templates (
  template_id    text        PRIMARY KEY,
  name           text        NOT NULL,
  version        integer     NOT NULL CHECK (version > 0),
  default_locale text        NOT NULL,
  description    text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  used_at        timestamptz
);

CREATE INDEX templates_name_version ON templates (name, version);

CREATE TABLE template_variants (
  template_id text  NOT NULL REFERENCES templates (template_id) ON DELETE CASCADE,
  locale      text  NOT NULL,
  -- {"push": {"title", "body"}, "email": {"subject", "text", "html"}, "sms": {"body"}, "in_app": {"title", "body"}}
  parts       jsonb NOT NULL,
  PRIMARY KEY (template_id, locale)
);
