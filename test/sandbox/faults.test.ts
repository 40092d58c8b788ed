/**
 * The sandbox's fault decisions: address triggers, profile lists, seeded rates, and the JSON form
 * with errors naming the field. Pure: no server.
 */
import t from 'tap';
import { PlatformError } from '../../shared/errors.js';
import { addressTrigger, decideFault, FaultTable, faultProfileJson, parseFaultProfile, seededRandom } from '../../sandbox/faults.js';
import { smsSegments } from '../../sandbox/store.js';

t.test('address triggers: push tokens and e-mail local parts by name, phone numbers by +999<status>', async (t) => {
  t.equal(addressTrigger('push', 'fault-UNREGISTERED-abc'), 'UNREGISTERED');
  t.equal(addressTrigger('push', 'fault-quota_exceeded'), 'QUOTA_EXCEEDED');
  t.equal(addressTrigger('push', 'fault-timeout.1'), 'TIMEOUT');
  t.equal(addressTrigger('push', 'token-fault-internal'), undefined, 'only as a prefix');
  t.equal(addressTrigger('push', 'fault-nonsense'), undefined, 'unknown names are ordinary tokens');
  t.equal(addressTrigger('email', 'fault-lost+7@example.com'), 'LOST');
  t.equal(addressTrigger('email', 'someone@fault-internal.example'), undefined, 'the domain does not trigger');
  t.equal(addressTrigger('sms', '+999503123456'), 'UNAVAILABLE');
  t.equal(addressTrigger('sms', '+999 429 1234'), 'QUOTA_EXCEEDED', 'spaces are ignored');
  t.equal(addressTrigger('sms', '+999408000'), 'TIMEOUT');
  t.equal(addressTrigger('sms', '+15005550006'), undefined);
});

t.test('without a profile only address triggers apply, and no randomness is drawn', async (t) => {
  let draws = 0;
  const random = () => (draws++, 0);
  t.same(decideFault(undefined, 'push', 'tok', random), { kind: 'pass', latencyMs: 0 });
  t.same(decideFault(undefined, 'sms', '+999400000', random), {
    kind: 'error',
    error: 'INVALID_ARGUMENT',
    latencyMs: 0,
    retryAfterS: undefined,
  });
  t.same(decideFault(undefined, 'push', 'fault-lost', random), { kind: 'lost', latencyMs: 0, holdMs: 30_000 });
  t.equal(draws, 0);
});

t.test('a profile: lists first, then one draw against timeout, error and lost rates, in that order', async (t) => {
  const p = parseFaultProfile({
    channel: 'push',
    latency_ms: 5,
    timeout_rate: 0.1,
    error_rate: 0.2,
    error: 'QUOTA_EXCEEDED',
    lost_response_rate: 0.3,
    retry_after_s: 7,
    hold_ms: 100,
    unregistered_tokens: ['dead'],
    invalid_recipients: ['bad'],
  });
  t.same(
    decideFault(p, 'push', 'dead', () => 0.99),
    { kind: 'error', error: 'UNREGISTERED', latencyMs: 5, retryAfterS: 7 },
  );
  t.same(
    decideFault(p, 'push', 'bad', () => 0.99),
    { kind: 'error', error: 'INVALID_ARGUMENT', latencyMs: 5, retryAfterS: 7 },
  );
  t.same(
    decideFault(p, 'push', 'x', () => 0.05),
    { kind: 'timeout', holdMs: 100 },
  );
  t.same(
    decideFault(p, 'push', 'x', () => 0.15),
    { kind: 'error', error: 'QUOTA_EXCEEDED', latencyMs: 5, retryAfterS: 7 },
  );
  t.same(
    decideFault(p, 'push', 'x', () => 0.45),
    { kind: 'lost', latencyMs: 5, holdMs: 100 },
  );
  t.same(
    decideFault(p, 'push', 'x', () => 0.7),
    { kind: 'pass', latencyMs: 5 },
  );
});

t.test('the same seed gives the same faults; another seed others', async (t) => {
  const p = parseFaultProfile({ channel: 'sms', error_rate: 0.5 });
  const run = (seed: number) => {
    const r = seededRandom(seed);
    return Array.from({ length: 200 }, () => decideFault(p, 'sms', '+1555', r).kind).join(',');
  };
  t.equal(run(42), run(42));
  t.not(run(42), run(43));
  const errors = run(42)
    .split(',')
    .filter((k) => k === 'error').length;
  t.ok(errors > 70 && errors < 130, `about half are errors (${errors}/200)`);
});

t.test('fault profiles: errors name the field', async (t) => {
  const bad: [unknown, string][] = [
    [{}, 'channel'],
    [{ channel: 'fax' }, 'channel'],
    [{ channel: 'push', error_rate: 2 }, 'error_rate'],
    [{ channel: 'push', error: 'BROKEN' }, 'error'],
    [{ channel: 'push', latency_ms: -1 }, 'latency_ms'],
    [{ channel: 'push', unregistered_tokens: [1] }, 'unregistered_tokens'],
    [{ channel: 'push', provider: 'a b' }, 'provider'],
    [{ channel: 'push', surprise: true }, 'surprise'],
    [{ channel: 'push', error_rate: 0.6, timeout_rate: 0.6 }, 'error_rate'],
    [[], 'body'],
  ];
  for (const [body, field] of bad) {
    try {
      parseFaultProfile(body);
      t.fail(`accepted ${JSON.stringify(body)}`);
    } catch (err) {
      t.ok(err instanceof PlatformError && err.code === 'invalid_field' && err.field === field, `${JSON.stringify(body)} → ${field}`);
    }
  }
});

t.test('the fault table: a provider’s own profile wins over *, and clear by channel', async (t) => {
  const table = new FaultTable();
  table.set(parseFaultProfile({ channel: 'sms', error_rate: 1 }));
  table.set(parseFaultProfile({ channel: 'sms', provider: 'secondary', latency_ms: 3 }));
  t.equal(table.get('sms', 'primary')?.errorRate, 1);
  t.equal(table.get('sms', 'secondary')?.latencyMs, 3);
  t.equal(table.get('push', 'primary'), undefined);
  t.same(faultProfileJson(table.get('sms', 'secondary')!).provider, 'secondary');
  table.clear('sms', 'secondary');
  t.equal(table.get('sms', 'secondary')?.errorRate, 1, 'falls back to *');
  table.clear();
  t.equal(table.list().length, 0);
});

t.test('SMS segments: 160 GSM-7 characters, 153 when concatenated; 70/67 for UCS-2', async (t) => {
  t.equal(smsSegments('a'.repeat(160)), 1);
  t.equal(smsSegments('a'.repeat(161)), 2);
  t.equal(smsSegments('a'.repeat(306)), 2);
  t.equal(smsSegments('a'.repeat(307)), 3);
  t.equal(smsSegments('ж'.repeat(70)), 1);
  t.equal(smsSegments('ж'.repeat(71)), 2);
});
