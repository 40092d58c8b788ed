-- A provider event that names no delivery of ours changes nothing (issue 24): the addresses a
-- permanent bounce or a complaint would suppress wait here, with the event, until the event
-- matches one of our deliveries (feedback/writer.ts, `rematch`); then they go on the suppression
-- list and this is cleared. NULL: nothing to suppress, or already applied. Kept no longer than the
-- event itself (retention deletes both).
ALTER TABLE provider_events ADD COLUMN suppress jsonb;
