/**
 * One key's versioned history as the control plane streams it, for the working-set version tests
 * (working-set-versions.test.ts, quota-relay.test.ts): a record, a full snapshot of the plans only,
 * and the delta of one version.
 */
import { create } from '@bufbuild/protobuf';
import { Algorithm, QuotaSchema, SnapshotSchema, type Quota, type Snapshot } from '../../../proto/gen/quota/v1/quota_pb.js';

/** A token bucket of `rate` (and burst `rate`) written at `version`. */
export function rec(subjectId: string, rate: number, version: number): Quota {
  return create(QuotaSchema, { subjectId, algorithm: Algorithm.TOKEN_BUCKET, rate, burst: rate, version: BigInt(version) });
}

/** A full snapshot at `version` holding the plan `plan:free` only. */
export function plansOnly(version: number): Snapshot {
  return create(SnapshotSchema, { version: BigInt(version), quotas: [rec('plan:free', 1, 1)] });
}

/** The delta of version v: `subject` written with `rate`, or deleted (null). */
export function deltaOf(subject: string, v: number, rate: number | null): Snapshot {
  return create(SnapshotSchema, {
    version: BigInt(v),
    delta: true,
    baseVersion: BigInt(v - 1),
    quotas: rate === null ? [] : [rec(subject, rate, v)],
    deletedSubjectIds: rate === null ? [subject] : [],
  });
}

/** One key's history over versions 1…n and the three moments of a lookup that races it. */
export interface KeyHistory {
  n: number;
  /** state[v]: the key's rate after version v (null: no record). */
  state: (number | null)[];
  /** written[v]: the version the record held after v was written at (0: none). */
  written: number[];
  /** The receiver's version when the lookup starts. */
  b: number;
  /** The version the control plane reads at (never below b: a delta is cut after its commit). */
  L: number;
  /** The receiver's version when the answer arrives (any order between the read and the deltas). */
  d: number;
}

/** The history fast-check's draws describe: `ops[v − 1]` is version v's write (a rate) or delete. */
export function keyHistory(ops: readonly (number | null)[], bSeed: number, lSeed: number, dSeed: number): KeyHistory {
  const n = ops.length;
  const state: (number | null)[] = [null];
  const written: number[] = [0];
  for (let v = 1; v <= n; v++) {
    state.push(ops[v - 1]!);
    written.push(ops[v - 1] === null ? 0 : v);
  }
  const b = bSeed % (n + 1);
  return { n, state, written, b, L: b + (lSeed % (n - b + 1)), d: b + (dSeed % (n - b + 1)) };
}
