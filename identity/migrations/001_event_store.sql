-- The identity service's event store (issue 5): an append-only log of domain events, snapshots of
-- aggregate state, the email reservations that keep addresses unique on the write side, and the
-- bookkeeping of the projectors (generations, checkpoints, dead letters, side-effect dedup).

-- One row per event. `position` orders the log globally; `(stream_id, stream_version)` orders one
-- stream and is the optimistic-concurrency guard (two writers at one version: one unique violation).
-- `tx` is the writing transaction: readers by position read only rows whose transaction is older
-- than every running one (tx < pg_snapshot_xmin(pg_current_snapshot())), ordered by (tx, position),
-- so an event whose transaction commits late is never skipped (see identity/events/store-sql.ts).
CREATE TABLE events (
  position       bigserial   PRIMARY KEY,
  stream_id      text        NOT NULL,
  stream_version integer     NOT NULL CHECK (stream_version > 0),
  event_type     text        NOT NULL,
  schema_version smallint    NOT NULL CHECK (schema_version > 0),
  event_id       uuid        NOT NULL,
  data           jsonb       NOT NULL,
  metadata       jsonb       NOT NULL DEFAULT '{}'::jsonb,
  recorded_at    timestamptz NOT NULL DEFAULT now(),
  tx             xid8        NOT NULL DEFAULT pg_current_xact_id(),
  CONSTRAINT events_stream_version_key UNIQUE (stream_id, stream_version),
  CONSTRAINT events_event_id_key UNIQUE (event_id)
);

CREATE INDEX events_tx_position_idx ON events (tx, position);

-- Events are facts: never updated, never deleted.
CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'events are append-only: % is not allowed', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events FOR EACH STATEMENT EXECUTE FUNCTION events_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events FOR EACH STATEMENT EXECUTE FUNCTION events_append_only();

-- The latest snapshot of an aggregate's state (every IDENTITY_SNAPSHOT_EVERY events). Loading reads
-- it and only the events after `stream_version`. `format` is the snapshot layout's version; a
-- snapshot of another format is ignored (full replay).
CREATE TABLE snapshots (
  stream_id      text        PRIMARY KEY,
  aggregate      text        NOT NULL,
  stream_version integer     NOT NULL,
  format         smallint    NOT NULL,
  state          jsonb       NOT NULL,
  taken_at       timestamptz NOT NULL DEFAULT now()
);

-- Email uniqueness on the write side: written in the same transaction as the event that claims or
-- releases the address. `email` is normalised (trimmed, lower-case).
CREATE TABLE email_reservations (
  email       text        PRIMARY KEY,
  user_id     text        NOT NULL,
  reserved_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX email_reservations_user_idx ON email_reservations (user_id);

-- One row per projector: the generation its live views read, and the one being rebuilt, if any.
-- Tables of generation g are named <table>_g<g>; the live view <table> selects from one of them.
CREATE TABLE projections (
  projector             text        PRIMARY KEY,
  live_generation       integer     NOT NULL,
  live_code_version     integer     NOT NULL,
  building_generation   integer,
  building_code_version integer,
  switched_at           timestamptz NOT NULL DEFAULT now()
);

-- Where each consumer (<projector>:g<generation>) is in the log: the (tx, position) of the last
-- event it has passed.
CREATE TABLE projection_checkpoints (
  consumer       text        PRIMARY KEY,
  tx             xid8        NOT NULL DEFAULT '0',
  position       bigint      NOT NULL DEFAULT 0,
  events_applied bigint      NOT NULL DEFAULT 0,
  updated_at     timestamptz NOT NULL DEFAULT now()
);

-- Events a projector failed on after its retries; re-driven by an operator after a fix.
CREATE TABLE projection_dead_letters (
  id          bigserial   PRIMARY KEY,
  projector   text        NOT NULL,
  generation  integer     NOT NULL,
  position    bigint      NOT NULL,
  event_id    uuid        NOT NULL,
  event_type  text        NOT NULL,
  attempts    integer     NOT NULL,
  error       text        NOT NULL,
  failed_at   timestamptz NOT NULL DEFAULT now(),
  status      text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'redriven', 'superseded')),
  resolved_at timestamptz,
  CONSTRAINT projection_dead_letters_event_key UNIQUE (projector, generation, event_id)
);

CREATE INDEX projection_dead_letters_open_idx ON projection_dead_letters (projector, id) WHERE status = 'open';

-- Side effects done, keyed on (effect, event id): a replay or a rebuild that meets the event again
-- finds the row and does nothing.
CREATE TABLE side_effects_done (
  effect   text        NOT NULL,
  event_id uuid        NOT NULL,
  done_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (effect, event_id)
);

-- Notifications for the notifier to send (an outbox): written by side-effect consumers in the same
-- transaction as their dedup row.
CREATE TABLE notification_outbox (
  id         bigserial   PRIMARY KEY,
  kind       text        NOT NULL,
  user_id    text        NOT NULL,
  event_id   uuid        NOT NULL,
  payload    jsonb       NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  sent_at    timestamptz
);

CREATE INDEX notification_outbox_unsent_idx ON notification_outbox (id) WHERE sent_at IS NULL;
