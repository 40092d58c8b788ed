-- Segments (notifier/segments): who a campaign is sent to. Two kinds:
-- `list`: a stored list of user ids, uploaded as a stream; each upload is a new version, written
--   while the live one keeps serving and switched to in one transaction when complete, so a
--   campaign always expands one consistent version (the one its fan-out pinned).
-- `rule`: equality filters over recipient profiles (locale, timezone) and profile tags, read live.
-- Membership is read in user_id order (keyset), which is what lets a fan-out shard and resume.
-- That order is byte order: every user_id column read in keyset order is COLLATE "C", so SQL
-- compares exactly as JavaScript does (user ids are visible ASCII, profiles/user-id.ts) whatever
-- the database's default collation is.
CREATE TABLE segments (
  id          text        PRIMARY KEY,
  kind        text        NOT NULL CHECK (kind IN ('list', 'rule')),
  -- rule segments: {"locale": "fr", "timezone": "Europe/Paris", "tags": ["beta"]} (every key optional, all must match)
  rule        jsonb,
  -- list: the live version (0 until the first upload completes); rule: bumped on every change of the rule
  version     integer     NOT NULL DEFAULT 0,
  -- list: the members of the live version
  size        bigint      NOT NULL DEFAULT 0,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  updated_by  text
);

-- Every upload of a list segment. `uploading` until its last line is stored, then `live` (and the
-- previous live version `retired`); an upload that failed or whose client went away is
-- `abandoned`. One upload per segment at a time; an `uploading` row whose writer stopped touching
-- it (the process died) is abandoned by the next upload or the clean-up (segments/cleanup.ts),
-- which also deletes the members of retired and abandoned versions that no open fan-out pins.
-- No foreign key to segments: a first upload has no segment row until it is switched in, so a
-- failed first upload leaves no segment behind.
CREATE TABLE segment_versions (
  segment_id   text        NOT NULL,
  version      integer     NOT NULL,
  state        text        NOT NULL CHECK (state IN ('uploading', 'live', 'retired', 'abandoned')),
  -- distinct members (exact: every batch adds the ids it inserted)
  size         bigint      NOT NULL DEFAULT 0,
  created_by   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  -- the writer's heartbeat while uploading (every stored batch)
  touched_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  -- set once the clean-up has deleted this version's members
  purged_at    timestamptz,
  PRIMARY KEY (segment_id, version)
);
-- At most one upload in progress per segment (the API answers 409 segment_upload_in_progress).
CREATE UNIQUE INDEX segment_versions_one_upload ON segment_versions (segment_id) WHERE state = 'uploading';
CREATE INDEX segment_versions_unpurged ON segment_versions (segment_id, version)
  WHERE state IN ('retired', 'abandoned') AND purged_at IS NULL;

-- The members of every stored version (no foreign key: written in bulk, removed with their
-- version by the clean-up).
CREATE TABLE segment_members (
  segment_id text                NOT NULL,
  version    integer             NOT NULL,
  user_id    text COLLATE "C"    NOT NULL,
  PRIMARY KEY (segment_id, version, user_id)
);

-- Tags a rule segment can select on, set with the profile (PUT /api/v1/users/{user_id}/profile).
ALTER TABLE user_profiles ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
CREATE INDEX user_profiles_tags ON user_profiles USING gin (tags);
-- Rule segments are read in user_id byte order over the primary key (see above); equality is
-- unchanged by the collation.
ALTER TABLE user_profiles ALTER COLUMN user_id SET DATA TYPE text COLLATE "C";
