/**
 * The ramp's pure parts: which provider a delivery goes to as the weight moves, the shadow share,
 * test recipients, and the retry policy's step to the old provider for a delivery on the new one.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { BUCKETS, onNewProvider, shadowed, testRecipient } from '../../../notifier/ramp/choice.js';
import { nextStep, type AttemptContext } from '../../../notifier/workers/retry-policy.js';

const ids: string[] = Array.from({ length: 20_000 }, () => randomUUID());

t.test('raising the weight only moves deliveries from the old provider to the new one, in proportion', async (t) => {
  const weights = [0, 100, 500, 2_500, 5_000, 9_500, BUCKETS];
  let previous = new Set<string>();
  for (const weight of weights) {
    const onNew = new Set(ids.filter((id) => onNewProvider(id, { weight, shadow: 0 })));
    t.ok(
      [...previous].every((id) => onNew.has(id)),
      `every delivery on the new provider below ${weight} stays there at ${weight}`,
    );
    const share = onNew.size / ids.length;
    t.ok(Math.abs(share - weight / BUCKETS) < 0.02, `weight ${weight}: share ${share.toFixed(4)}`);
    previous = onNew;
  }
  t.equal(previous.size, ids.length, 'at 100% every delivery is on the new provider');
});

t.test('the same delivery gets the same answer every time (a retry stays on its provider)', async (t) => {
  for (const id of ids.slice(0, 100))
    t.equal(onNewProvider(id, { weight: 5_000, shadow: 0 }), onNewProvider(id, { weight: 5_000, shadow: 0 }));
});

t.test('the shadow share is taken from the old provider’s deliveries only, independently of the weight', async (t) => {
  const s = { weight: 5_000, shadow: 2_000 };
  const shadowedIds = ids.filter((id) => shadowed(id, s));
  t.ok(
    shadowedIds.every((id) => !onNewProvider(id, s)),
    'a delivery on the new provider is never shadowed',
  );
  const share = shadowedIds.length / ids.filter((id) => !onNewProvider(id, s)).length;
  t.ok(Math.abs(share - 0.2) < 0.02, `20% of the old provider's deliveries: ${share.toFixed(4)}`);
  t.equal(ids.filter((id) => shadowed(id, { weight: 0, shadow: 0 })).length, 0);
});

t.test('test recipients: spread over the list, none without a list', async (t) => {
  const list = ['a@test.example', 'b@test.example', 'c@test.example'];
  const used = new Set(ids.slice(0, 300).map((id) => testRecipient(id, list)));
  t.same([...used].sort(), list);
  t.equal(testRecipient(ids[0]!, []), undefined);
});

const ctx = (over: Partial<AttemptContext>): AttemptContext => ({
  tier: 'normal',
  channel: 'push',
  attempts: 3,
  scheduleMs: [50, 100],
  usedSecondary: false,
  hasSecondary: true,
  failedOver: false,
  failoverTo: 'sms',
  ...over,
});
const unavailable = { kind: 'retry', reason: 'provider_unavailable' } as const;

t.test('retry policy: the old provider is the failover of the new one', async (t) => {
  t.same(
    nextStep(unavailable, ctx({ onNewProvider: true })),
    { do: 'secondary', reason: 'provider_unavailable' },
    'normal tier, retries spent',
  );
  t.same(
    nextStep(unavailable, ctx({ onNewProvider: false })),
    { do: 'dead_letter', reason: 'retries_exhausted', last: 'provider_unavailable' },
    'unchanged off a ramp: a normal delivery has no secondary',
  );
  t.same(nextStep(unavailable, ctx({ onNewProvider: true, attempts: 1 })), { do: 'retry', delayMs: 50, reason: 'provider_unavailable' });
  t.same(
    nextStep(unavailable, ctx({ onNewProvider: true, tier: 'transactional', attempts: 1 })),
    { do: 'secondary', reason: 'provider_unavailable' },
    'a transactional push on the new provider tries the old one at once',
  );
  t.same(
    nextStep(unavailable, ctx({ onNewProvider: true, tier: 'transactional', attempts: 2, usedSecondary: true })),
    { do: 'failover', to: 'sms', reason: 'provider_unavailable' },
    'then changes channel',
  );
  t.same(
    nextStep({ kind: 'permanent', reason: 'invalid_message' }, ctx({ onNewProvider: true, tier: 'transactional', attempts: 1 })),
    { do: 'failover', to: 'sms', reason: 'invalid_message' },
    'a refused message is not the provider failing: unchanged',
  );
  t.same(
    nextStep(unavailable, ctx({ onNewProvider: false, tier: 'transactional', attempts: 1 })),
    { do: 'failover', to: 'sms', reason: 'provider_unavailable' },
    'a transactional push on the old provider still fails over at once',
  );
  t.same(
    nextStep(unavailable, ctx({ onNewProvider: true, tier: 'high', usedSecondary: true })),
    { do: 'failover', to: 'sms', reason: 'provider_unavailable', after: 'secondary_failed' },
    'high: the old provider failing too, the cross-channel failover',
  );
});
