-- Campaigns (notifier/campaigns): a request with `audience: {"segment": …}` is one notification
-- whose fan-out (campaign_fanouts) is planned into shards (campaign_shards) that queued jobs
-- expand into delivery records, one statement per shard with its checkpoint. What each state
-- means: notifier/README.md, "Campaigns".

-- The kill switch's unit: every request naming this campaign_id. Stopped once, stopped for good.
CREATE TABLE campaigns (
  id          text        PRIMARY KEY,
  created_at  timestamptz NOT NULL DEFAULT now(),
  stopped_at  timestamptz,
  stopped_by  text,
  stop_reason text
);

-- An audience request is one notification with a segment instead of a recipient; it stays
-- unrouted (routed_at NULL, its campaign job in route_job_id, so the reconciler replaces a lost
-- one) until its fan-out is finished: expanded, rejected, or cancelled and swept.
ALTER TABLE notifications ALTER COLUMN recipient_id DROP NOT NULL;
ALTER TABLE notifications ADD COLUMN segment_id text;
ALTER TABLE notifications ADD CONSTRAINT notifications_one_target CHECK ((recipient_id IS NULL) <> (segment_id IS NULL));
CREATE INDEX notifications_campaign ON notifications (campaign_id) WHERE campaign_id IS NOT NULL;

-- One audience request's fan-out.
CREATE TABLE campaign_fanouts (
  notification_id   uuid        PRIMARY KEY REFERENCES notifications (id) ON DELETE CASCADE,
  campaign_id       text        NOT NULL REFERENCES campaigns (id),
  segment_id        text        NOT NULL,
  -- The segment version this fan-out expands, pinned when it is planned (a rule segment's rule
  -- too: every shard reads with the rule the plan counted).
  segment_version   integer,
  segment_kind      text        CHECK (segment_kind IN ('list', 'rule')),
  segment_rule      jsonb,
  -- planning → (pending_approval →) expanding → expanded; rejected; cancelled (the campaign was stopped)
  state             text        NOT NULL DEFAULT 'planning'
                    CHECK (state IN ('planning', 'pending_approval', 'expanding', 'expanded', 'rejected', 'cancelled')),
  -- The segment's size when planned.
  recipients        bigint,
  shards            integer,
  shards_done       integer     NOT NULL DEFAULT 0,
  -- Approval (segments above NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD): who decided, when.
  approved          boolean,
  decided_by        text,
  decided_at        timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  planned_at        timestamptz,
  expanded_at       timestamptz,
  -- Expanded and every delivery woken: the pump (campaigns/pump.ts) looks at it no more.
  drained_at        timestamptz,
  updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX campaign_fanouts_campaign ON campaign_fanouts (campaign_id);
-- What the pump scans: expanded fan-outs whose deliveries may still need wake-ups.
CREATE INDEX campaign_fanouts_pumping ON campaign_fanouts (created_at) WHERE state = 'expanded' AND drained_at IS NULL;
-- A segment version still to be expanded is kept by the segment clean-up.
CREATE INDEX campaign_fanouts_open_segment ON campaign_fanouts (segment_id, segment_version)
  WHERE state IN ('planning', 'pending_approval', 'expanding');

-- The shards of a fan-out: members first_user ≤ user_id < next_user (NULL: to the end), in the
-- segment's keyset order. `done` is the checkpoint, written in the transaction that wrote the
-- shard's delivery records.
CREATE TABLE campaign_shards (
  notification_id uuid        NOT NULL REFERENCES campaign_fanouts (notification_id) ON DELETE CASCADE,
  shard           integer     NOT NULL,
  first_user      text        NOT NULL,
  next_user       text,
  state           text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'cancelled')),
  members         integer,
  -- The shard's job (the planning step re-sends one that is no longer waiting in pg-boss).
  job_id          uuid,
  done_at         timestamptz,
  PRIMARY KEY (notification_id, shard)
);

-- Progress counters as deltas (appended, never updated in place, so concurrent shards and sends
-- never wait on one counter row); the status view sums them and folds them together now and then
-- (campaigns/counts.ts). `status` is a delivery state, or `members` (channel '') for recipients
-- expanded.
CREATE TABLE campaign_counts (
  notification_id uuid   NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
  channel         text   NOT NULL,
  status          text   NOT NULL,
  n               bigint NOT NULL
);
CREATE INDEX campaign_counts_notification ON campaign_counts (notification_id);

-- Who approved, rejected or stopped what, when.
CREATE TABLE campaign_audit (
  id              bigserial   PRIMARY KEY,
  campaign_id     text        NOT NULL,
  notification_id uuid,
  action          text        NOT NULL CHECK (action IN ('approve', 'reject', 'stop')),
  actor           text        NOT NULL,
  detail          jsonb       NOT NULL DEFAULT '{}'::jsonb,
  at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX campaign_audit_campaign ON campaign_audit (campaign_id, at);

-- The notifier replicas alive now (a heartbeat), and which of them acknowledged a stop: a
-- replica acknowledges once it will start no provider call for that campaign.
CREATE TABLE notifier_replicas (
  id           text        PRIMARY KEY,
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE campaign_stop_acks (
  campaign_id text        NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
  replica_id  text        NOT NULL,
  acked_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (campaign_id, replica_id)
);

-- A campaign's delivery records: written by a shard (campaign_shard), with no hashed idempotency
-- key: a member gets one delivery per channel because shards partition the members and a shard's
-- rows are written in the transaction that checkpoints it (campaigns/fanout.ts), so no unique index
-- has to be kept (at 154 bytes a row, it was the widest of the table's indexes). A shard's rows are
-- one range of this narrow index (what the sweep after a stop reads), and they are woken by the
-- campaign pump (campaigns/pump.ts), which gives them wake-ups at delivery speed rather than a
-- million at once.
ALTER TABLE deliveries ADD COLUMN campaign_shard integer;
ALTER TABLE deliveries ALTER COLUMN idempotency_key DROP NOT NULL;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_key_or_campaign CHECK (idempotency_key IS NOT NULL OR campaign_shard IS NOT NULL);
CREATE INDEX deliveries_campaign_shard ON deliveries (notification_id, campaign_shard) WHERE campaign_shard IS NOT NULL;
-- The reconciler's index leaves out the pump's rows (a million unwoken deliveries would otherwise
-- sit in its scan; workers/reconcile.ts names the same predicate).
DROP INDEX deliveries_pending;
CREATE INDEX deliveries_pending ON deliveries ((coalesce(next_attempt_at, created_at)))
  WHERE status IN ('queued', 'sending') AND (campaign_shard IS NULL OR wake_job_id IS NOT NULL);
-- The pump's index: a running fan-out's unwoken deliveries per channel, due first. It leads with
-- the notification, so a stopped campaign's million unwoken rows are never in another's scan.
CREATE INDEX deliveries_campaign_unwoken ON deliveries (notification_id, channel, (coalesce(next_attempt_at, created_at)))
  WHERE campaign_shard IS NOT NULL AND status = 'queued' AND wake_job_id IS NULL;

ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (status IN (
  'queued', 'sending', 'sent', 'delivered', 'opened', 'read', 'failed', 'dead_lettered',
  'opted_out', 'capped', 'digested', 'cancelled'));

-- Every change of a campaign delivery's state moves its counters, whichever code path made it:
-- one aggregated insert per statement.
CREATE FUNCTION campaign_count_moves() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO campaign_counts (notification_id, channel, status, n)
  SELECT m.notification_id, m.channel, m.status, sum(m.n)
    FROM (SELECT o.notification_id, o.channel, o.status, -1 AS n
            FROM old_rows o JOIN new_rows w ON w.id = o.id
           WHERE o.campaign_shard IS NOT NULL AND o.status <> w.status
          UNION ALL
          SELECT w.notification_id, w.channel, w.status, 1
            FROM old_rows o JOIN new_rows w ON w.id = o.id
           WHERE w.campaign_shard IS NOT NULL AND o.status <> w.status) m
   GROUP BY m.notification_id, m.channel, m.status
  HAVING sum(m.n) <> 0;
  RETURN NULL;
END $$;
CREATE TRIGGER deliveries_campaign_counts AFTER UPDATE ON deliveries
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION campaign_count_moves();
