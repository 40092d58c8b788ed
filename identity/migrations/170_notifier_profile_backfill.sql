-- Users registered before the relay (migration 140) have no notifier_profile_sync row, so the
-- notifier would not learn their address until their next e-mail change. Record each one's current
-- address (email_reservations: normalised, trimmed and lower-case) at their stream's current
-- version; the relay pushes it like any other (reading the notifier's profile first, keeping its
-- phone, locale and timezone). A row the welcome projector already wrote is left as it is.
INSERT INTO notifier_profile_sync (user_id, email, version)
SELECT DISTINCT ON (r.user_id) r.user_id, r.email,
       coalesce((SELECT max(e.stream_version) FROM events e WHERE e.stream_id = 'user-' || r.user_id), 1)
  FROM email_reservations r
 ORDER BY r.user_id, r.reserved_at DESC
ON CONFLICT (user_id) DO NOTHING;
