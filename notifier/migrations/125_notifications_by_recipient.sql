-- The operator's lookup of a user's notifications (GET /api/v1/admin/notifications?user_id=),
-- newest first with a (created_at, id) cursor: one index range per page, never a scan of the table.
CREATE INDEX IF NOT EXISTS notifications_recipient_created ON notifications (recipient_id, created_at DESC, id DESC)
  WHERE recipient_id IS NOT NULL;
