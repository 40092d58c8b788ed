-- Which replica is expanding a shard (notifier_replicas.id), written as its shard job starts
-- (campaigns/fanout.ts), so that when that replica stops heartbeating its shard is handed to a
-- live one within seconds (campaigns/shard-rescue.ts) instead of when pg-boss expires the job.
ALTER TABLE campaign_shards ADD COLUMN claimed_by text;
-- The rescue's scan: pending shards that have, or may have, a worker.
CREATE INDEX campaign_shards_pending ON campaign_shards (notification_id, shard) WHERE state = 'pending';
