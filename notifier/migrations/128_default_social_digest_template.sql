-- The digest template of the default notification-type catalogue (notifier/policy/types.ts): seed
-- 000 makes `normal` notifications subject to digesting, with a 5-minute example window, so the
-- default `social_activity` digests its `normal` and `low` sends into `social_digest_v1`. A digest
-- whose template did not exist would be dead-lettered (`unknown_template`), so the notifier brings
-- it. It reads no item field (items are whatever the digested notifications carried), only
-- `{{count}}`, and has a part for each of the type's default channels. An operator's own
-- definition wins: inserted only when absent, and, like any version, replaceable with PUT until
-- first used (after that, name social_digest_v2 in NOTIFIER_NOTIFICATION_TYPES).
INSERT INTO templates (template_id, name, version, default_locale, description)
VALUES ('social_digest_v1', 'social_digest', 1, 'en', 'The default digest of social activity (notifier/policy/types.ts)')
ON CONFLICT (template_id) DO NOTHING;

INSERT INTO template_variants (template_id, locale, parts)
SELECT 'social_digest_v1', 'en',
       '{"push": {"title": "New activity", "body": "{{count}} new since your last update"},
         "in_app": {"title": "New activity", "body": "{{count}} new since your last update"}}'::jsonb
WHERE NOT EXISTS (SELECT 1 FROM template_variants WHERE template_id = 'social_digest_v1');
