-- The quota control plane's durable state: the quota table, its global version, and the change
-- log from which sidecars catch up by deltas.
--
-- Every committed write (put or delete) takes the next version. Writers lock the single row of
-- quota_table_version first (UPDATE ... RETURNING), so writes are serialised and versions are
-- gap-free in commit order: a reader that sees version N sees every change up to N.

CREATE TABLE quota_table_version (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version   bigint  NOT NULL CHECK (version >= 0)
);
INSERT INTO quota_table_version (singleton, version) VALUES (true, 0);

-- One row per subject. API keys appear only as key:<sha256 hex>. A plan reference (rate 0) has no
-- algorithm, burst, interval or cost of its own: those columns are NULL / 0 there.
CREATE TABLE quotas (
  subject_id  text        COLLATE "C" PRIMARY KEY,
  algorithm   text        CHECK (algorithm IN ('token_bucket', 'sliding_window', 'leaky_bucket', 'fixed_window')),
  rate        bigint      NOT NULL CHECK (rate BETWEEN 0 AND 4294967295),
  burst       bigint      NOT NULL CHECK (burst BETWEEN 0 AND 4294967295),
  interval_ms bigint      NOT NULL CHECK (interval_ms BETWEEN 0 AND 4294967295),
  cost        bigint      NOT NULL CHECK (cost BETWEEN 0 AND 4294967295),
  fail_mode   text        CHECK (fail_mode IN ('open', 'closed')),
  shadow      boolean     NOT NULL,
  plan        text        NOT NULL,
  routes      jsonb       NOT NULL,
  version     bigint      NOT NULL,
  updated_at  timestamptz NOT NULL,
  CONSTRAINT quotas_subject_form CHECK (
    char_length(subject_id) <= 128
    AND subject_id ~ '^(key:[0-9a-f]{64}|(user|tenant):[!-~]+|plan:[A-Za-z0-9_.-]{1,64})$'
  ),
  CONSTRAINT quotas_reference_names_plan CHECK (rate > 0 OR plan <> '')
);

-- Finding the references to a plan (a plan with references cannot be deleted).
CREATE INDEX quotas_plan_references ON quotas (plan) WHERE rate = 0;

-- The recent changes, one per version. record is the stored quota's JSON (proto-json of
-- quota.v1.Quota) for an upsert, NULL for a delete. Pruned to CONTROL_PLANE_CHANGELOG_KEEP versions.
CREATE TABLE quota_changes (
  version      bigint      PRIMARY KEY,
  subject_id   text        NOT NULL,
  op           text        NOT NULL CHECK (op IN ('upsert', 'delete')),
  record       jsonb,
  committed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK ((op = 'upsert') = (record IS NOT NULL))
);
