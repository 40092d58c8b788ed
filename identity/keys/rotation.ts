/**
 * One rotation step: plan (key-schedule.ts) and apply, in one transaction under an advisory lock,
 * so replicas running the step at the same moment do it once. Run at start and then on a timer
 * (startOAuth); every step is safe to repeat.
 */
import { withTransaction, type Pool, type PoolClient } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import { generateSigningKey } from './key-material.js';
import { planRotation, type KeyAction, type RotationPolicy } from './key-schedule.js';
import { deleteKey, insertKey, listKeys, setRetireAt } from './key-store.js';

// pg_advisory_xact_lock(int, int) namespace 'keys' and object 1: apart from the migration runner's.
const LOCK_NAMESPACE = 0x6b657973;
const LOCK_OBJECT = 1;

/**
 * Runs `fn` in a transaction holding the key-schedule lock, so that rotation steps and revocations
 * of every replica apply one at a time.
 */
export function withKeyLock<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  return withTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1, $2)', [LOCK_NAMESPACE, LOCK_OBJECT]);
    return fn(client);
  });
}

export interface RotationResult {
  created: string[];
  retireScheduled: string[];
  deleted: string[];
}

/** Applies the rotation schedule at `now`. Resolves with what changed (kids only). */
export async function runRotationStep(pool: Pool, policy: RotationPolicy, now: number, log?: Logger): Promise<RotationResult> {
  const result: RotationResult = { created: [], retireScheduled: [], deleted: [] };
  await withKeyLock(pool, async (client) => {
    // A create makes the superseded key's retirement due in the same step: plan again (at most
    // twice more; a plan after its own actions asks for nothing new).
    for (let round = 0; round < 3; round++) {
      const actions: KeyAction[] = planRotation(await listKeys(client), now, policy);
      if (actions.length === 0) break;
      for (const a of actions) {
        if (a.type === 'create') {
          const key = await generateSigningKey(a.alg);
          await insertKey(client, { ...key, createdAt: now, activateAt: a.activateAt });
          result.created.push(key.kid);
        } else if (a.type === 'schedule_retire') {
          await setRetireAt(client, a.kid, a.retireAt);
          result.retireScheduled.push(a.kid);
        } else {
          await deleteKey(client, a.kid);
          result.deleted.push(a.kid);
        }
      }
    }
  });
  if (result.created.length + result.retireScheduled.length + result.deleted.length > 0) {
    log?.info({ ...result, alg: policy.alg }, 'signing keys: rotation step applied');
  }
  return result;
}
