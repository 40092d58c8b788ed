-- The provider ramp (issue 15 item 6, notifier/ramp): per channel, the share of live deliveries
-- sent with the new provider and the share of the old provider's deliveries shadow-sent to it,
-- both in hundredths of a percent (0 to 10000). A channel without a row has everything on the old
-- provider and no shadow. Changed only through the operator API, which NOTIFIEs
-- `notifier_provider_ramp` so every replica rereads at once (each also rereads on a timer).
CREATE TABLE provider_ramps (
  channel text PRIMARY KEY CHECK (channel IN ('push', 'email', 'sms')),
  weight integer NOT NULL CHECK (weight BETWEEN 0 AND 10000),
  shadow integer NOT NULL CHECK (shadow BETWEEN 0 AND 10000),
  updated_by text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Every change, kept: who set what, when, and what it was before.
CREATE TABLE provider_ramp_changes (
  id bigserial PRIMARY KEY,
  channel text NOT NULL,
  weight integer NOT NULL,
  shadow integer NOT NULL,
  previous_weight integer NOT NULL,
  previous_shadow integer NOT NULL,
  changed_by text NOT NULL,
  changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX provider_ramp_changes_channel ON provider_ramp_changes (channel, id);
