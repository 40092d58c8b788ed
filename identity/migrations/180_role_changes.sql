-- Every change of an account's role (credentials.role), by whom and when: `npm run admin --
-- promote` (changed_by `cli:<os user>`) and IDENTITY_BOOTSTRAP_ADMIN (changed_by `bootstrap`). The
-- bootstrap promotes an account once: a `bootstrap` row for the user means it is done, so a later
-- demotion by an operator is not undone at the next start.
CREATE TABLE role_changes (
  change_id  bigserial   PRIMARY KEY,
  user_id    text        NOT NULL,
  from_role  text        NOT NULL,
  to_role    text        NOT NULL,
  changed_by text        NOT NULL,
  at         timestamptz NOT NULL
);
CREATE INDEX role_changes_user ON role_changes (user_id, at);
