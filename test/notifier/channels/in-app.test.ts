// @tier: pure
/** The in-app channel: an injected inbox write under a deadline and a breaker. */
import t from 'tap';
import { createInAppChannel } from '../../../notifier/channels/in-app.js';
import type { OutboundMessage, SendContext } from '../../../notifier/channels/channel.js';
import { FakeClock } from '../../../shared/clock.js';
import { ctx, guardDeps, message } from './helpers.js';

t.test('writes the item through writeInbox and reports its id (or the delivery id)', async (t) => {
  const written: [OutboundMessage, SendContext][] = [];
  const c = createInAppChannel(
    {
      timeoutMs: 1_000,
      writeInbox: async (msg, context) => {
        written.push([msg, context]);
        return msg.title === 'no id' ? undefined : `inbox-${written.length}`;
      },
    },
    guardDeps(),
  );
  t.equal(c.name, 'in_app');
  t.equal(c.provider, 'inbox');
  t.same(await c.send(message('user-1'), ctx(1_000, 'd-in-1')), { ok: true, providerMessageId: 'inbox-1' });
  t.same(await c.send(message('user-1', { title: 'no id' }), ctx(1_000, 'd-in-2')), { ok: true, providerMessageId: 'd-in-2' });
  t.equal(written[0]![1].deliveryId, 'd-in-1');
  t.equal(written[0]![0].body, 'Your code is 123456');
});

t.test('a failed write → retry inbox_write_failed; a slow one → retry timeout; repeated failures open the breaker', async (t) => {
  let mode: 'fail' | 'slow' = 'fail';
  // A slow write lasts until the test lets it finish.
  let slowWrites = 0;
  let finishSlow!: () => void;
  const slowDone = new Promise<string>((resolve) => (finishSlow = () => resolve('late')));
  t.teardown(() => finishSlow());
  const c = createInAppChannel(
    {
      timeoutMs: 600_000, // only the send deadline can end the slow write's wait
      writeInbox: () => {
        if (mode === 'fail') return Promise.reject(new Error('connection terminated'));
        slowWrites++;
        return slowDone;
      },
    },
    guardDeps({ minVolume: 3, errorThreshold: 0.5 }, new FakeClock(0)),
  );
  t.match(await c.send(message('user-1'), ctx()), {
    ok: false,
    kind: 'retry',
    reason: 'inbox_write_failed',
    detail: 'connection terminated',
  });
  mode = 'slow';
  t.match(await c.send(message('user-1'), ctx(50)), { ok: false, kind: 'retry', reason: 'timeout' });
  t.equal(slowWrites, 1, 'did not wait for the slow write: it was called and is still unfinished');
  finishSlow();
  mode = 'fail';
  await c.send(message('user-1'), ctx());
  t.equal(c.breakerState(), 'open');
  t.match(await c.send(message('user-1'), ctx()), { kind: 'retry', reason: 'circuit_open' });
});
