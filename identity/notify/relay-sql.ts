/**
 * The relay's SQL (pure builders). Claims lock rows `FOR UPDATE SKIP LOCKED` in a transaction the
 * relay holds while it calls the notifier, so across replicas one relay at a time sends a given row,
 * and a row is marked only after the notifier's answer, in that same transaction.
 */

/** A profile whose latest address the notifier has not accepted, due now, not parked at this version. */
export const CLAIM_PROFILES = {
  name: 'notify_claim_profiles',
  text: `SELECT user_id, email, version, attempts FROM notifier_profile_sync
 WHERE synced_version < version AND (parked_version IS NULL OR parked_version < version) AND next_attempt_at <= now()
 ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
};

/**
 * The oldest pending row of each user, due now, whose user's profile is in step (or parked, or
 * never recorded): a user's rows go out in order, and a welcome e-mail or an alert is sent after
 * the address written with it reached the notifier. A row whose older sibling is locked by another
 * replica waits: that sibling is still unsent.
 */
export const CLAIM_OUTBOX = {
  name: 'notify_claim_outbox',
  text: `SELECT o.id::text AS id, o.kind, o.user_id, o.payload, o.attempts FROM notification_outbox o
 WHERE o.sent_at IS NULL AND o.parked_at IS NULL AND o.next_attempt_at <= now()
   AND NOT EXISTS (SELECT 1 FROM notification_outbox e
                    WHERE e.user_id = o.user_id AND e.id < o.id AND e.sent_at IS NULL AND e.parked_at IS NULL)
   AND NOT EXISTS (SELECT 1 FROM notifier_profile_sync p
                    WHERE p.user_id = o.user_id AND p.synced_version < p.version
                      AND (p.parked_version IS NULL OR p.parked_version < p.version))
 ORDER BY o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED`,
};

export const OUTBOX_SENT = {
  name: 'notify_outbox_sent',
  text: `UPDATE notification_outbox SET sent_at = now(), attempts = attempts + 1, last_error = NULL WHERE id = $1`,
};

export const OUTBOX_RETRY = {
  name: 'notify_outbox_retry',
  text: `UPDATE notification_outbox SET attempts = attempts + 1, last_error = $2,
  next_attempt_at = now() + make_interval(secs => $3::float8 / 1000) WHERE id = $1`,
};

export const OUTBOX_PARK = {
  name: 'notify_outbox_park',
  text: `UPDATE notification_outbox SET attempts = attempts + 1, last_error = $2, parked_at = now() WHERE id = $1`,
};

export const PROFILE_SYNCED = {
  name: 'notify_profile_synced',
  text: `UPDATE notifier_profile_sync SET synced_version = $2, attempts = 0, last_error = NULL, updated_at = now()
 WHERE user_id = $1`,
};

export const PROFILE_RETRY = {
  name: 'notify_profile_retry',
  text: `UPDATE notifier_profile_sync SET attempts = attempts + 1, last_error = $2,
  next_attempt_at = now() + make_interval(secs => $3::float8 / 1000), updated_at = now() WHERE user_id = $1`,
};

export const PROFILE_PARK = {
  name: 'notify_profile_park',
  text: `UPDATE notifier_profile_sync SET attempts = attempts + 1, last_error = $2, parked_version = $3, updated_at = now()
 WHERE user_id = $1`,
};
