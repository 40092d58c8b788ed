-- The notifications and deliveries tables own their state (notifier/README.md, "Who owns a
-- delivery's state"); pg-boss jobs are only wake-ups. The id of the last wake-up sent for a row
-- lets the reconciler (notifier/workers/reconcile.ts) tell a wake-up that was lost from one that
-- is still waiting in its queue.
ALTER TABLE notifications ADD COLUMN route_job_id uuid;
ALTER TABLE deliveries ADD COLUMN wake_job_id uuid;

-- What the reconciler scans: rows that still need a worker.
CREATE INDEX notifications_unrouted ON notifications (created_at) WHERE routed_at IS NULL;
CREATE INDEX deliveries_pending ON deliveries ((coalesce(next_attempt_at, created_at))) WHERE status IN ('queued', 'sending');
