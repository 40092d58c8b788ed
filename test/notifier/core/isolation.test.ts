/**
 * Channel isolation (README, "Delivery, retries, failover, the dead-letter queue": separate queues
 * and worker pools, so a slow channel cannot block the
 * others): while every push call hangs until its deadline, e-mails of the same tier keep flowing
 * with their usual latency. And `low` is deferred while the urgent queues are backed up.
 */
import t from 'tap';
import { waitFor } from '../../harness/wait.js';
import { createTemplate, putProfile, addDevice, request, scriptedChannels, startCore } from './helpers.js';

t.test('a hanging push provider does not move e-mail latency', async (t) => {
  const channels = scriptedChannels();
  let releasePush!: () => void;
  const pushHeld = new Promise<void>((r) => (releasePush = r));
  channels.primary.push.script = async () => {
    await pushHeld;
    return { ok: false, kind: 'retry', reason: 'timeout' };
  };
  const core = await startCore(t, 'core_isolation', { channels, env: { NOTIFIER_CONCURRENCY: 'transactional=4,high=4,normal=2,low=1' } });
  t.teardown(() => releasePush());
  await createTemplate(core, 'code_v1');
  await putProfile(core, 'u1', { email: 'ada@example.test' });
  await addDevice(core, 'u1', 'tok');

  // Fill the push pool and its queue first.
  for (let i = 0; i < 12; i++) await core.notify(request({ channels: ['push'], priority: 'high' }));
  await waitFor(() => channels.primary.push.calls.length >= 4, { what: 'the push pool of 4 to be taken' });
  t.equal(channels.primary.push.calls.length, 4, 'push: its pool of 4 is stuck');

  const started = Date.now();
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) ids.push((await core.notify(request({ channels: ['email'], priority: 'high' }))).body.notification_id);
  for (const id of ids) await core.waitStatus(id, (s) => s.status === 'sent', 5000);
  t.comment(`12 e-mails in ${Date.now() - started} ms with push hung`);
  t.equal(channels.primary.email.calls.length, 12, 'every e-mail went out');
  t.equal(channels.primary.push.calls.length, 4, 'while push was still stuck on its first calls');
  releasePush();
});

t.test('low is deferred while transactional and high are backed up', async (t) => {
  const channels = scriptedChannels();
  const core = await startCore(t, 'core_shedding', {
    channels,
    env: { NOTIFIER_WORKERS: 'true', NOTIFIER_BACKPRESSURE_THRESHOLD: '10', NOTIFIER_CONCURRENCY: 'transactional=1,high=1,normal=1,low=1' },
  });
  await createTemplate(core, 'code_v1');
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  t.teardown(() => release());
  channels.primary.email.script = async (_m, ctx) => {
    await held;
    return { ok: true, providerMessageId: ctx.deliveryId };
  };
  await putProfile(core, 'u1', { email: 'ada@example.test' });
  for (let i = 0; i < 20; i++) await core.notify(request({ channels: ['email'], priority: 'high' }));
  await waitFor(() => core.notifier.backpressure.level === 1, { what: 'backpressure to defer low' });
  // Counts the times a low-tier worker asked to fetch and was told to wait.
  const bp = core.notifier.backpressure;
  const mayRun = bp.mayRun.bind(bp);
  let lowRefused = 0;
  bp.mayRun = (tier) => {
    const ok = mayRun(tier);
    if (tier === 'low' && !ok) lowRefused++;
    return ok;
  };
  const low = (await core.notify(request({ channels: ['in_app'], priority: 'low' }))).body.notification_id;
  const normal = (await core.notify(request({ channels: ['in_app'], priority: 'normal' }))).body.notification_id;
  await core.waitStatus(normal, (s) => s.status === 'sent');
  // Every low worker (route and four channels) has looked several times since low was queued.
  const refusedBefore = lowRefused;
  await waitFor(() => lowRefused >= refusedBefore + 25, { what: 'the low workers to be held back again' });
  const waiting = await core.status(low);
  t.equal(waiting.status, 'queued', 'low waits while high has a backlog');
  t.match(waiting.details.in_app.reason, /^deferred: the low tier waits/, 'and says why');
  release();
  await core.waitStatus(low, (s) => s.status === 'sent', 10_000);
  t.pass('and goes out once the backlog drains');
});
