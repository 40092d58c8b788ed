/**
 * Emergency revocation of a signing key (a leaked key): plan (key-schedule.ts `planRevocation`)
 * and apply in one transaction under the key-schedule lock, then NOTIFY the other replicas. The
 * key is out of the JWKS and never signs again from the commit on, on this replica at once (the
 * caller reloads) and on the others on the NOTIFY, or at their next poll if it is lost
 * (key-watch.ts). Idempotent: revoking a revoked key changes nothing and says so.
 */
import type { Pool } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import { generateSigningKey } from './key-material.js';
import { planRevocation, type RotationPolicy } from './key-schedule.js';
import { insertKey, listKeys, listKeyStatus, markRevoked, notifyKeysChanged, setActivateAt } from './key-store.js';
import { withKeyLock } from './rotation.js';

export interface RevocationResult {
  readonly kid: string;
  /** Epoch ms; for an already revoked key, when it was revoked. */
  readonly revokedAt: number;
  /** True when the key had been revoked before this call (nothing changed). */
  readonly alreadyRevoked: boolean;
  /** The key that signs from now on, when the revoked key was the signing key. */
  readonly successor: { readonly kid: string; readonly how: 'promoted' | 'created' } | undefined;
}

/** Longest revocation reason kept; it is an operator's note, not a document. */
export const MAX_REASON_LENGTH = 500;

/**
 * Revokes `kid` at `now`. Resolves undefined when no key, revoked or not, has this kid (it was
 * never ours, or it retired and was deleted: either way nothing can verify with it any more).
 */
export async function revokeSigningKey(
  pool: Pool,
  policy: RotationPolicy,
  kid: string,
  now: number,
  reason: string | undefined,
  log?: Logger,
): Promise<RevocationResult | undefined> {
  const result = await withKeyLock(pool, async (client): Promise<RevocationResult | undefined> => {
    const actions = planRevocation(await listKeys(client), kid, now, policy);
    if (!actions) {
      const known = (await listKeyStatus(client)).find((k) => k.kid === kid);
      if (known?.revokedAt === undefined) return undefined;
      return { kid, revokedAt: known.revokedAt, alreadyRevoked: true, successor: undefined };
    }
    let successor: RevocationResult['successor'];
    for (const a of actions) {
      if (a.type === 'revoke') {
        await markRevoked(client, a.kid, now, reason);
      } else if (a.type === 'activate') {
        await setActivateAt(client, a.kid, a.activateAt);
        successor = { kid: a.kid, how: 'promoted' };
      } else {
        const key = await generateSigningKey(a.alg);
        await insertKey(client, { ...key, createdAt: now, activateAt: a.activateAt });
        successor = { kid: key.kid, how: 'created' };
      }
    }
    await notifyKeysChanged(client, kid);
    return { kid, revokedAt: now, alreadyRevoked: false, successor };
  });
  if (result && !result.alreadyRevoked) {
    log?.warn(
      { kid, successor: result.successor?.kid, successor_how: result.successor?.how, reason },
      'signing keys: key revoked; it is out of the JWKS and signs nothing from now on',
    );
  }
  return result;
}
