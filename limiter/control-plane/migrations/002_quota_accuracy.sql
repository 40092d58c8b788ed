-- A quota's accuracy across sidecars (quota.v1.Accuracy): NULL when unspecified (exact),
-- 'approximate' for leased tokens (token and leaky buckets only; limiter/admission/README.md,
-- "Approximate mode"). Records written before this column read as unspecified.
ALTER TABLE quotas ADD COLUMN accuracy text CHECK (accuracy IN ('exact', 'approximate'));
