// @tier: pure
/**
 * What a recipient would see (sandbox/display.ts): a repeated push replaces the first on
 * the device when it carries the identifier the device's platform honours, and adds a second entry
 * when it does not; a repeated e-mail is a second entry in the mailbox, under one Message-ID; an
 * SMS always adds. The providers de-duplicate nothing, so the duplicates at the provider and those
 * visible to the recipient are counted apart, through the admin API and through our real channels.
 */
import t from 'tap';
import { getGlobalDispatcher } from 'undici';
import { DisplayModel, replaceKey } from '../../sandbox/display.js';
import type { SandboxMessage } from '../../sandbox/store.js';
import { createFcmChannel } from '../../notifier/channels/push-fcm.js';
import { createSmtpChannel } from '../../notifier/channels/email-smtp.js';
import { replaceIds } from '../../notifier/channels/push-replace.js';
import { CREDENTIALS, ctx, guardDeps, message, useSandbox } from '../notifier/channels/helpers.js';
import type { Sandbox } from '../../sandbox/app.js';

t.teardown(() => getGlobalDispatcher().close());

let seq = 0;
const push = (to: string, deliveryId: string, ids?: SandboxMessage['replace_ids']): SandboxMessage => ({
  id: `m${++seq}`,
  channel: 'push',
  provider: 'primary',
  to,
  delivery_id: deliveryId,
  received_at: seq,
  ...(ids ? { replace_ids: ids } : {}),
});

t.test('the model: each platform replaces by its own identifier, and adds without it', async (t) => {
  const d = new DisplayModel(1000);
  d.register('ios-1', 'ios');
  d.register('web-1', 'web');
  const all = { apns_collapse_id: 'd1', android_tag: 'd1', webpush_tag: 'd1' };
  for (const token of ['ios-1', 'web-1', 'android-1']) {
    d.accept(push(token, 'd1', all));
    d.accept(push(token, 'd1', all));
  }
  for (const token of ['ios-1', 'web-1', 'android-1']) {
    const v = d.view('push', token);
    t.equal(v.shown.length, 1, `${token}: one notification shown`);
    t.equal(v.shown[0]!.replaced, 1, `${token}: the second copy replaced the first`);
  }
  t.equal(d.view('push', 'android-1').platform, 'android', 'a token never registered is android');

  // Only the identifier of the device's own platform counts.
  d.accept(push('ios-1', 'd2', { android_tag: 'd2', webpush_tag: 'd2' }));
  d.accept(push('ios-1', 'd2', { android_tag: 'd2', webpush_tag: 'd2' }));
  t.equal(d.view('push', 'ios-1').shown.filter((s) => s.delivery_id === 'd2').length, 2, 'iOS ignores Android and web tags');
  d.accept(push('android-1', 'd3'));
  d.accept(push('android-1', 'd3'));
  t.equal(d.view('push', 'android-1').shown.filter((s) => s.delivery_id === 'd3').length, 2, 'no identifier: each copy adds');
  // Two deliveries never collapse into one another.
  d.accept(push('web-1', 'd4', { webpush_tag: 'd4' }));
  t.equal(d.view('push', 'web-1').shown.length, 2);

  t.same(d.summary().push, { recipients: 3, arrived: 11, shown: 8, replaced: 3, visible_duplicates: 2 });
  t.equal(replaceKey('web', undefined), undefined);
});

t.test('the model: a mailbox lists every copy, under one Message-ID; a phone shows every SMS', async (t) => {
  const d = new DisplayModel(1000);
  const mail = (id: string): SandboxMessage => ({
    id,
    channel: 'email',
    provider: 'primary',
    to: 'ada@example.test',
    delivery_id: 'd1',
    message_id: '<d1@example.test>',
    received_at: 1,
  });
  d.accept(mail('q1'));
  d.accept(mail('q2'));
  const box = d.view('email', 'ada@example.test');
  t.equal(box.shown.length, 2, 'two entries: clients that do not de-duplicate show both');
  t.equal(box.distinct_message_ids, 1, 'one Message-ID: a mailbox that de-duplicates on it shows one');
  t.equal(box.threads, 1);
  // A relay that replaces the Message-ID (SES) keeps References: still one thread, two Message-IDs.
  const relayed = (id: string): SandboxMessage => ({
    ...mail(id),
    to: 'bob@example.test',
    message_id: `<${id}@email.amazonses.com>`,
    references: ['<d1@example.test>'],
  });
  d.accept(relayed('r1'));
  d.accept(relayed('r2'));
  t.match(d.view('email', 'bob@example.test'), { distinct_message_ids: 2, threads: 1 });
  const sms = (id: string): SandboxMessage => ({
    id,
    channel: 'sms',
    provider: 'primary',
    to: '+14155550100',
    delivery_id: 's1',
    received_at: 1,
  });
  d.accept(sms('SM1'));
  d.accept(sms('SM2'));
  const s = d.summary();
  t.match(s.email, { arrived: 4, shown: 4, visible_duplicates: 2 });
  t.match(s.sms, { arrived: 2, shown: 2, visible_duplicates: 1 });
  d.clear();
  t.same(d.summary().email, { recipients: 0, arrived: 0, shown: 0, replaced: 0, visible_duplicates: 0 });
});

t.test('the model keeps a bounded number of entries, forgetting the recipients heard from longest ago', async (t) => {
  const d = new DisplayModel(3);
  for (let i = 0; i < 5; i++) d.accept(push(`tok-${i}`, `d${i}`));
  t.equal(d.summary().push.shown, 3);
  t.same(d.view('push', 'tok-0').shown, [], 'the oldest device is forgotten');
  t.equal(d.view('push', 'tok-4').shown.length, 1);
});

async function display(s: Sandbox): Promise<Record<string, Record<string, number>>> {
  return (await (await fetch(`${s.url}/sandbox/display`)).json()) as Record<string, Record<string, number>>;
}

t.test(
  'through the FCM channel: a send repeated with the same delivery id is two messages at FCM, one notification on each device',
  async (t) => {
    const s = await useSandbox(t);
    for (const [token, platform] of [
      ['ios-tok', 'ios'],
      ['web-tok', 'web'],
    ] as const) {
      const r = await fetch(`${s.url}/sandbox/devices/${token}`, { method: 'PUT', body: JSON.stringify({ platform }) });
      t.equal(r.status, 204);
    }
    const bad = await fetch(`${s.url}/sandbox/devices/x`, { method: 'PUT', body: JSON.stringify({ platform: 'symbian' }) });
    t.equal(bad.status, 400);
    const c = createFcmChannel(
      { baseUrl: s.url, projectId: 'p', accessToken: CREDENTIALS.fcmAccessToken, timeoutMs: 2_000, connections: 2 },
      guardDeps(),
    );
    t.teardown(() => c.close());
    const id = '6f1c2c1e-8a51-4a47-9d43-3c7a9a0d0c11';
    for (const token of ['ios-tok', 'web-tok', 'android-tok']) {
      t.ok((await c.send(message(token), ctx(2_000, id))).ok);
      t.ok((await c.send(message(token), ctx(2_000, id))).ok, 'FCM takes the repeat: it has no idempotency key');
    }
    const [first] = s.messages({ channel: 'push', to: 'ios-tok' });
    t.same(first!.replace_ids, { apns_collapse_id: id, android_tag: id, webpush_tag: id }, 'every platform gets the delivery id');
    const counts = await display(s);
    t.match(counts.push, { arrived: 6, shown: 3, replaced: 3, visible_duplicates: 0, provider_duplicates: 3 });
    const ios = (await (await fetch(`${s.url}/sandbox/display/push/ios-tok`)).json()) as { platform: string; shown: unknown[] };
    t.equal(ios.platform, 'ios');
    t.match(ios.shown, [{ delivery_id: id, key: id, replaced: 1 }]);

    // The same repeat without the identifiers (what the notifier sent before): two notifications.
    const bare = { message: { token: 'android-bare', notification: { body: 'x' }, data: { delivery_id: 'd-bare' } } };
    for (let i = 0; i < 2; i++) {
      const r = await fetch(`${s.url}/v1/projects/p/messages:send`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CREDENTIALS.fcmAccessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(bare),
      });
      t.equal(r.status, 200);
    }
    t.match((await display(s)).push, { visible_duplicates: 1, provider_duplicates: 4 });

    const wrong = await fetch(`${s.url}/v1/projects/p/messages:send`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CREDENTIALS.fcmAccessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: { token: 't', android: { notification: { tag: 7 } } } }),
    });
    t.equal(wrong.status, 400, 'a tag that is not a string is INVALID_ARGUMENT, as FCM answers');
    t.match(await wrong.json(), {
      error: { status: 'INVALID_ARGUMENT', details: [{}, { fieldViolations: [{ field: 'message.android.notification.tag' }] }] },
    });

    t.equal((await fetch(`${s.url}/sandbox/messages`, { method: 'DELETE' })).status, 204);
    t.match((await display(s)).push, { arrived: 0, provider_duplicates: 0 });
  },
);

t.test('replace identifiers fit APNs: a delivery id over 64 bytes becomes a stable hash', async (t) => {
  t.same(replaceIds('abc'), { apnsCollapseId: 'abc', tag: 'abc' });
  const long = 'x'.repeat(65);
  const ids = replaceIds(long);
  t.equal(Buffer.byteLength(ids.apnsCollapseId), 43);
  t.same(replaceIds(long), ids, 'the same on every attempt');
});

t.test(
  'through the SMTP channel: a repeated e-mail keeps its Message-ID and References and is a second entry in the mailbox',
  async (t) => {
    const s = await useSandbox(t);
    const c = createSmtpChannel({ url: s.smtpUrl, from: 'N <n@mail.example.test>', poolSize: 1, timeoutMs: 2_000 }, guardDeps());
    t.teardown(() => c.close());
    for (let i = 0; i < 2; i++) t.ok((await c.send(message('ada@example.test', { subject: 'S' }), ctx(2_000, 'd-mail'))).ok);
    const box = (await (await fetch(`${s.url}/sandbox/display/email/${encodeURIComponent('ada@example.test')}`)).json()) as {
      shown: { key: string; thread: string }[];
      distinct_message_ids: number;
      threads: number;
    };
    t.equal(box.shown.length, 2);
    t.same(
      box.shown.map((e) => e.key),
      ['<d-mail@mail.example.test>', '<d-mail@mail.example.test>'],
    );
    t.equal(box.distinct_message_ids, 1);
    t.equal(box.threads, 1);
    t.equal(box.shown[0]!.thread, '<d-mail@mail.example.test>', 'References names the same id');
    t.match((await display(s)).email, { visible_duplicates: 1, provider_duplicates: 1 });
  },
);
