-- Accounts and authorization (issue 6, items 1 and 7).

-- Failed sign-ins per account and per client address, counted in fixed windows. In Postgres, not
-- in the process, so every identity replica sees the same counts. `key` is the SHA-256 of the
-- normalised email (scope 'account'; unknown addresses are counted too, so the throttle is no
-- existence oracle, and no address is stored in clear) or the client address (scope 'ip').
CREATE TABLE login_failures (
  scope        text        NOT NULL CHECK (scope IN ('account', 'ip')),
  key          text        NOT NULL,
  window_start timestamptz NOT NULL,
  failures     integer     NOT NULL,
  PRIMARY KEY (scope, key)
);
CREATE INDEX login_failures_window ON login_failures (window_start);

-- One row per read of an order through read_any_order (support, admin), successful or not,
-- written in the same transaction as the read. `subject` is `order:<id>` or `customer:<id>`;
-- `outcome` is `ok` or the error code the caller got (order_not_found, ...).
CREATE TABLE order_access_audit (
  audit_id   bigserial   PRIMARY KEY,
  actor_id   text        NOT NULL,
  actor_role text        NOT NULL,
  action     text        NOT NULL,
  subject    text        NOT NULL,
  reason     text        NOT NULL,
  outcome    text        NOT NULL,
  at         timestamptz NOT NULL
);
CREATE INDEX order_access_audit_subject ON order_access_audit (subject, at);
CREATE INDEX order_access_audit_actor ON order_access_audit (actor_id, at);
