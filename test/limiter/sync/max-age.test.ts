// @tier: pure
/**
 * limiter/quota-sync-max-age.ts: how a stale quota is held to the floor plan.
 */
import t from 'tap';
import { Algorithm } from '../../../proto/gen/quota/v1/quota_pb.js';
import { compileQuota } from '../../../limiter/quota-cache.js';
import { capLimit, capToFloor } from '../../../limiter/quota-sync-max-age.js';
import type { LimitParams } from '../../../limiter/admission/limit.js';
import { quota } from './fake-control-plane.js';

const floor = compileQuota(quota('plan:default', 100, { plan: 'default', burst: 200 }));
const floorLimit = floor.limit!;

t.test('capLimit: rate per unit of time and burst, on the quota’s own interval and algorithm', async (t) => {
  const paid: LimitParams = { algorithm: 'sliding_window', rate: 6000, burst: 9000, intervalMs: 60_000 };
  t.strictSame(capLimit(paid, floorLimit), { algorithm: 'sliding_window', rate: 6000, burst: 200, intervalMs: 60_000 }, '100/s = 6000/min');
  const faster: LimitParams = { algorithm: 'token_bucket', rate: 60_000, burst: 1000, intervalMs: 60_000 };
  t.strictSame(capLimit(faster, floorLimit), { algorithm: 'token_bucket', rate: 6000, burst: 200, intervalMs: 60_000 });
  const small: LimitParams = { algorithm: 'token_bucket', rate: 5, burst: 10, intervalMs: 1000 };
  t.equal(capLimit(small, floorLimit), small, 'below the floor: the same object');
  const tiny: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 1, intervalMs: 1 };
  t.equal(capLimit(tiny, floorLimit), floorLimit, '1 per ms is above 100/s, and 100/s rounds to 0 per ms: the floor itself');
  const slowTiny: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 1, intervalMs: 5 };
  t.equal(capLimit(slowTiny, { ...floorLimit, rate: 1000 }), slowTiny, '1 per 5 ms is below 1000/s');
});

t.test('capToFloor: a paid quota is held to the floor, route limits too, and it says so in its policy', async (t) => {
  const pro = compileQuota(
    quota('key:paid', 1000, {
      plan: 'pro',
      routes: [
        { pathPrefix: '/v1/search', cost: 5, rate: 500, burst: 500 },
        { pathPrefix: '/v1/cheap', cost: 1, rate: 10, burst: 10 },
        { pathPrefix: '/v1/other', cost: 2 },
      ],
    }),
  );
  const held = capToFloor(pro, floor);
  t.not(held, pro);
  t.strictSame(held.limit, { algorithm: 'token_bucket', rate: 100, burst: 200, intervalMs: 1000 });
  t.equal(held.policy, 'default');
  const rule = (p: string) => held.rules.find((r) => r.prefix === p)!;
  t.strictSame(rule('/v1/search').limit, { algorithm: 'token_bucket', rate: 100, burst: 200, intervalMs: 1000 });
  t.equal(rule('/v1/search').cost, 5, 'costs are kept');
  t.equal(
    rule('/v1/cheap'),
    pro.rules.find((r) => r.prefix === '/v1/cheap'),
    'a route already below the floor is kept',
  );
  t.equal(rule('/v1/other').limit, null);
  t.equal(held.subject, 'key:paid');
  t.equal(pro.limit?.rate, 1000, 'the cached quota itself is untouched');
  t.equal(capToFloor(pro, floor), held, 'memoised: the same object on the next request');
  const otherFloor = compileQuota(quota('plan:default', 50, { plan: 'default' }));
  t.equal(capToFloor(pro, otherFloor).limit?.rate, 50, 'recomputed for another floor');
});

t.test('capToFloor: quotas within the floor, the floor itself and unresolved references', async (t) => {
  const free = compileQuota(quota('key:free', 10, { burst: 10 }));
  t.equal(capToFloor(free, floor), free, 'a free key stays free: never raised');
  t.equal(capToFloor(floor, floor), floor);
  const ref = compileQuota(quota('key:ref', 0, { plan: 'gone' }));
  t.equal(ref.limit, null);
  t.strictSame(capToFloor(ref, floor).limit, floorLimit, 'a reference with no limit is held to the floor');
  const noLimitFloor = compileQuota(quota('plan:odd', 0, { plan: 'odd' }));
  const pro = compileQuota(quota('key:paid', 1000, { algorithm: Algorithm.TOKEN_BUCKET }));
  t.equal(capToFloor(pro, noLimitFloor), pro, 'a floor without a limit caps nothing');
});
