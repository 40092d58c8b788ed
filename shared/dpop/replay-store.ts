/**
 * Where the `jti` of every accepted DPoP proof is remembered until the proof could no longer be
 * accepted anyway (its `iat` leaves the window), so a proof is used once. One interface, one file
 * per backend: in process (replay-store.memory.ts, per process), Redis (replay-store.redis.ts,
 * shared by every sidecar on that Redis), Postgres (identity/tokens/dpop-jti-store.ts, shared by
 * identity's replicas).
 */
export interface DpopReplayStore {
  /**
   * Records `key` for `ttlMs`. Resolves true when it was not recorded before (the proof is fresh),
   * false when it was (a replay). Rejects when the store cannot answer; the caller refuses the
   * request (fail closed: a replay must never pass because the store was down).
   */
  claim(key: string, ttlMs: number): Promise<boolean>;
}
