// @tier: pure
/**
 * limiter/upstream/budget.ts alone: over any sequence of takes, gives and reclaims, no more slots
 * are held than the limit, waiters are granted in the order they asked, and every slot given back
 * goes to a waiter while one waits.
 */
import t from 'tap';
import fc from 'fast-check';
import { ConnectionBudget } from '../../../limiter/upstream/budget.js';

t.test('property: never over the limit, first come first served, no slot idle while a taker waits', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 5 }),
      fc.array(fc.constantFrom('take', 'give', 'idle', 'reclaimable'), { maxLength: 80 }),
      (limit, ops) => {
        const b = new ConnectionBudget(limit);
        let held = 0;
        /** Connections the owner of `reclaim` could close (idle h1 connections), each holding a slot. */
        let idle = 0;
        b.reclaim = () => {
          if (idle === 0) return false;
          idle--;
          held--;
          b.give();
          return true;
        };
        let asked = 0;
        const granted: number[] = [];
        for (const op of ops) {
          if (op === 'take') {
            const n = asked++;
            b.take(() => {
              granted.push(n);
              held++;
            });
          } else if (op === 'give' && held - idle > 0) {
            held--;
            b.give();
          } else if (op === 'idle' && held - idle > 0) {
            // A busy connection is done: kept idle with its slot, or closed when a taker waits (H1Pool.idle).
            if (b.waiters > 0) {
              held--;
              b.give();
            } else idle++;
          } else if (op === 'reclaimable' && idle > 0) {
            idle--; // an idle connection is taken for a request again
          }
          if (held > limit) throw new Error(`${held} slots held, limit ${limit}`);
          if (b.inUse !== held) throw new Error(`the budget counts ${b.inUse}, ${held} held`);
          if (b.waiters > 0 && held < limit) throw new Error(`${b.waiters} waiting with ${limit - held} slots free`);
          if (b.waiters > 0 && idle > 0) throw new Error('a taker waits while an idle connection could be closed');
        }
        for (let i = 1; i < granted.length; i++)
          if (granted[i]! < granted[i - 1]!) throw new Error(`granted out of order: ${granted.join(',')}`);
      },
    ),
    { numRuns: 500 },
  );
  t.pass('500 drawn sequences held every invariant'); // fc.assert throws on the first that does not
});
