/**
 * The signing-key rotation schedule, as pure functions of (keys, now, policy).
 *
 * A key goes through three stages, each fixed by a time written when it is created or succeeded:
 *
 * 1. **published** from `createdAt`: it is in the JWKS, so verifiers can load it;
 * 2. **signing** from `activateAt` = `createdAt` + one JWKS cache lifetime, so every verifier that
 *    caches the JWKS has seen it before the first token it signs arrives; the newest key whose
 *    `activateAt` has passed signs, and its predecessor stops signing at that moment;
 * 3. **retired** at `retireAt` = its successor's `activateAt` + the longest token lifetime: the last
 *    token it signed has expired, so it leaves the JWKS.
 *
 * Because the moments are decided ahead and stored, every replica switches keys at the same
 * instant without talking to the others; a replica only has to have loaded the new key once, at
 * any time during its publication lifetime.
 */

export type SigningAlg = 'ES256' | 'RS256';

export interface KeyRecord {
  readonly kid: string;
  readonly alg: SigningAlg;
  /** Epoch ms. Published from here. */
  readonly createdAt: number;
  /** Epoch ms. Signs from here (until a newer key activates). */
  readonly activateAt: number;
  /** Epoch ms. Leaves the JWKS here; undefined while no successor has been scheduled. */
  readonly retireAt: number | undefined;
}

export interface RotationPolicy {
  /** Algorithm of new keys. An active key of another algorithm is rotated out on the schedule. */
  readonly alg: SigningAlg;
  /** How long a key signs before a successor is published; 0: only on an algorithm change. */
  readonly rotationIntervalMs: number;
  /** The JWKS cache lifetime: how long a key is published before it signs. */
  readonly jwksMaxAgeMs: number;
  /** The longest lifetime of any token signed with these keys, plus clock skew. */
  readonly retireAfterMs: number;
}

export type KeyAction =
  | { readonly type: 'create'; readonly alg: SigningAlg; readonly activateAt: number }
  | { readonly type: 'schedule_retire'; readonly kid: string; readonly retireAt: number }
  | { readonly type: 'delete'; readonly kid: string };

function live(k: KeyRecord, now: number): boolean {
  return k.retireAt === undefined || k.retireAt > now;
}

/** The key that signs at `now`: the live key with the latest `activateAt` not after `now`. */
export function signingKeyAt<K extends KeyRecord>(keys: readonly K[], now: number): K | undefined {
  let best: K | undefined;
  for (const k of keys) {
    if (!live(k, now) || k.activateAt > now) continue;
    if (!best || k.activateAt > best.activateAt || (k.activateAt === best.activateAt && k.createdAt > best.createdAt)) best = k;
  }
  return best;
}

/** The keys the JWKS lists at `now`: every key not yet retired, pending ones included. */
export function publishedKeysAt<K extends KeyRecord>(keys: readonly K[], now: number): K[] {
  return keys.filter((k) => live(k, now) && k.createdAt <= now);
}

/**
 * What a rotation step must do at `now`. Idempotent: applying the actions and planning again at
 * the same time yields only what the new state implies (a retirement for the key just superseded).
 */
export function planRotation(keys: readonly KeyRecord[], now: number, policy: RotationPolicy): KeyAction[] {
  const actions: KeyAction[] = [];
  const active = signingKeyAt(keys, now);
  const pending = keys.filter((k) => live(k, now) && k.activateAt > now);

  if (!active) {
    // Nothing signs: at first start, or after every key retired. No verifier can hold a token of
    // ours, so there is no cache to wait for: the new key signs at once.
    if (pending.length === 0) actions.push({ type: 'create', alg: policy.alg, activateAt: now });
  } else if (pending.length === 0) {
    const due = policy.rotationIntervalMs > 0 && now >= active.activateAt + policy.rotationIntervalMs;
    if (due || active.alg !== policy.alg) {
      actions.push({ type: 'create', alg: policy.alg, activateAt: now + policy.jwksMaxAgeMs });
    }
  }

  // A key with a successor retires once everything it can have signed has expired.
  for (const k of keys) {
    if (k.retireAt !== undefined) continue;
    let successor: KeyRecord | undefined;
    for (const s of keys) {
      if (s.activateAt > k.activateAt && (!successor || s.activateAt < successor.activateAt)) successor = s;
    }
    if (successor) actions.push({ type: 'schedule_retire', kid: k.kid, retireAt: successor.activateAt + policy.retireAfterMs });
  }

  for (const k of keys) if (k.retireAt !== undefined && k.retireAt <= now) actions.push({ type: 'delete', kid: k.kid });
  return actions;
}

export type RevocationAction =
  | { readonly type: 'revoke'; readonly kid: string }
  | { readonly type: 'activate'; readonly kid: string; readonly activateAt: number }
  | { readonly type: 'create'; readonly alg: SigningAlg; readonly activateAt: number };

/**
 * What an emergency revocation of `kid` at `now` must do, or undefined when `kid` is not among
 * `keys` (the unrevoked keys). The key leaves the schedule at once: it is neither published nor
 * signs from `now`. If it was the key signing now, a successor signs from `now` too, never an
 * older key (whatever an older key still verifies, it was superseded and must not sign again):
 *
 * - a pending key already published (so verifiers that cached the JWKS since have it) is promoted:
 *   its `activateAt` moves to `now`;
 * - else a new key is created that signs at once. Verifiers have not seen it yet: a token it signs
 *   is an unknown kid at a verifier until its next JWKS refresh (or the refetch that unknown kid
 *   triggers). That gap, and the death of every token the revoked key signed, are the price.
 *
 * A pending or superseded key is only removed; the rotation step schedules a new pending key when
 * one is due, as it always does.
 */
export function planRevocation(
  keys: readonly KeyRecord[],
  kid: string,
  now: number,
  policy: RotationPolicy,
): RevocationAction[] | undefined {
  if (!keys.some((k) => k.kid === kid)) return undefined;
  const actions: RevocationAction[] = [{ type: 'revoke', kid }];
  if (signingKeyAt(keys, now)?.kid !== kid) return actions;
  let promote: KeyRecord | undefined;
  for (const k of keys) {
    if (k.kid === kid || !live(k, now) || k.activateAt <= now || k.createdAt > now || k.alg !== policy.alg) continue;
    if (!promote || k.activateAt < promote.activateAt) promote = k;
  }
  actions.push(promote ? { type: 'activate', kid: promote.kid, activateAt: now } : { type: 'create', alg: policy.alg, activateAt: now });
  return actions;
}
