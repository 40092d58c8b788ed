/**
 * The campaigns page against the real notifier (browser), with an approval threshold of two
 * members: a campaign held for approval is listed as waiting, approved from its page and then
 * sends to every member (the counts per state say so, refreshed); another is stopped with the kill
 * switch after the confirmation, and the answer lists each notifier replica's acknowledgement;
 * a look-up by id, and an unknown one.
 */
import t from 'tap';
import { waitFor } from '../harness/wait.js';
import { SERVICE_SECRET } from '../notifier/core/helpers.js';
import { startPlatform, OPERATOR, type Platform } from './platform.js';
import { useBrowser } from './browser.js';
import { signInAsOperator } from './signin.js';
import { checkAccessible } from './ops-a11y.js';

const as = (role: string, subject: string): Record<string, string> => ({
  'x-subject': subject,
  'x-subject-role': role,
  'x-subject-secret': SERVICE_SECRET,
});
const SERVICE = as('service', `key:${'a'.repeat(64)}`);
const ADMIN = as('admin', 'user:setup');
const MEMBERS = ['m1', 'm2', 'm3'];

async function notifier(
  p: Platform,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string | object,
  contentType = 'application/json',
) {
  const res = await fetch(`${p.notifierUrl}${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': contentType }) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
}

/** An audience request for `campaign` to the `vip` segment: held for approval (3 members > 2). */
async function heldCampaign(p: Platform, campaign: string): Promise<string> {
  const r = await notifier(p, 'POST', '/api/v1/notifications', SERVICE, {
    event_type: 'marketing.spring',
    audience: { segment: 'vip' },
    campaign_id: campaign,
    template_id: 'promo_v1',
    template_data: { code: 'SPRING' },
    priority: 'low',
    channels: ['push'],
  });
  if (r.status !== 202) throw new Error(`campaign ${campaign}: ${r.status} ${JSON.stringify(r.body)}`);
  const id = r.body!['notification_id'] as string;
  await waitFor(
    async () =>
      (await p.db.pool.query(`SELECT 1 FROM campaign_fanouts WHERE notification_id = $1 AND state = 'pending_approval'`, [id])).rowCount,
    {
      timeoutMs: 20_000,
      what: `${campaign} held for approval`,
    },
  );
  return id;
}

t.test('the campaigns page', async (t) => {
  const platform = await startPlatform(
    t,
    'console_campaigns',
    {},
    {
      NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD: '2',
      NOTIFIER_CAMPAIGN_SHARD_SIZE: '100',
      NOTIFIER_CAMPAIGN_PUMP_IDLE: '20ms',
      NOTIFIER_REPLICA_HEARTBEAT: '200ms',
    },
  );
  const browser = await useBrowser(t);
  const template = await notifier(platform, 'PUT', '/api/v1/admin/templates/promo_v1', SERVICE, {
    default_locale: 'en',
    variants: { en: { push: { title: 'Spring', body: 'Code {{code}}' } } },
  });
  t.equal(template.status, 201);
  const upload = await notifier(
    platform,
    'PUT',
    '/api/v1/admin/segments/vip/members',
    ADMIN,
    MEMBERS.map((m) => JSON.stringify(m)).join('\n'),
    'application/x-ndjson',
  );
  t.equal(upload.status, 201);
  await platform.db.pool.query(
    `INSERT INTO device_tokens (token, user_id, platform) SELECT 'tok-' || u, u, 'android' FROM unnest($1::text[]) AS u`,
    [MEMBERS],
  );

  await t.test('approve a held campaign; it sends to every member', async (t) => {
    await heldCampaign(platform, 'spring');
    const page = await browser.page(t);
    await signInAsOperator(page, platform.consoleUrl, OPERATOR, '/campaigns?pending=true');
    t.equal(await page.locator('main').getAttribute('data-page'), 'campaigns');
    t.match(await page.locator('#campaigns').innerText(), /spring[\s\S]*waiting for approval/);
    await page.getByRole('link', { name: 'spring' }).click();
    t.equal(await page.locator('#campaign-state').innerText(), 'waiting for approval');
    t.equal(
      await page.locator('#approval-text').innerText(),
      "1 request of this campaign is held: its segment has more members than the notifier's approval threshold " +
        '(NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD). Approving sends to 3 recipients; nothing is sent until an operator decides.',
      'the recipients are not called the threshold',
    );
    t.equal(await page.locator('#campaign-progress').getAttribute('data-refresh'), null, 'no auto-refresh while waiting for a decision');

    await page.getByLabel('Reason (kept in the audit trail)').fill('list checked');
    await page.getByRole('button', { name: 'Approve and send' }).click();
    t.match(await page.locator('.flash.success').innerText(), /Approved 1 request of spring: the fan-out starts now/);
    await waitFor(
      async () => {
        await page.goto(`${platform.consoleUrl}/campaigns/spring`);
        return (await page.locator('#campaign-totals td[data-count="sent"]').innerText()) === '3';
      },
      { timeoutMs: 30_000, intervalMs: 300, what: 'three pushes sent, as the page shows it' },
    );
    t.equal(await page.locator('#campaign-totals td[data-count="recipients"]').innerText(), '3');
    t.match(
      await page.locator('#campaign-fanouts tbody').innerText(),
      /vip v1\s+expanded[\s\S]*approved by Olive Operator \(ops@example\.com\)/,
    );
    t.equal(await page.locator('#campaign-state').innerText(), 'finished', 'every member sent to: finished');
    const audit = page.locator('#campaign-audit tbody tr').first();
    t.match(await audit.innerText(), /approve\s+Olive Operator \(ops@example\.com\)/, 'the approver by name');
    t.equal(await audit.locator('.person').getAttribute('title'), `user:${platform.operatorId}`, 'the id on hover');
    t.equal(
      await audit
        .locator('dl.fields dt')
        .allInnerTexts()
        .then((x) => x.join(',')),
      'Reason',
      'the detail as fields',
    );
    t.equal(await audit.locator('dl.fields dd').innerText(), 'list checked');
    t.notMatch(await audit.innerText(), /[{}]/, 'not raw JSON');
  });

  await t.test('stop a campaign: a confirmation, then every replica acknowledges', async (t) => {
    await heldCampaign(platform, 'autumn');
    const page = await browser.page(t);
    await page.goto(`${platform.consoleUrl}/campaigns`);
    await page.getByLabel('Campaign id').fill('autumn');
    await page.getByRole('button', { name: 'Look up' }).click();
    t.equal(new URL(page.url()).pathname, '/campaigns/autumn');

    await page.getByLabel('Reason', { exact: true }).fill('wrong price');
    await page.getByRole('button', { name: 'Stop campaign' }).click();
    t.match(await page.locator('.field-error').innerText(), /Tick the box/);
    const stopped = async () =>
      (await platform.db.pool.query<{ stopped_at: Date | null }>(`SELECT stopped_at FROM campaigns WHERE id = 'autumn'`)).rows[0]
        ?.stopped_at;
    t.equal(await stopped(), null, 'not stopped without the confirmation');

    await page.getByLabel('Yes, stop autumn for good').check();
    await page.getByRole('button', { name: 'Stop campaign' }).click();
    t.equal(await page.locator('h1').innerText(), 'Campaign autumn stopped');
    t.match(await page.locator('main .flash').innerText(), /Every live notifier replica acknowledged/);
    const acks = await page.locator('#stop-acks tbody tr').allInnerTexts();
    t.equal(acks.length, 1, 'one notifier replica');
    t.match(acks[0], /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/, 'with the time it acknowledged');
    t.ok(await stopped());

    await page.getByRole('link', { name: 'Back to the campaign' }).click();
    t.match(await page.locator('.stopped').innerText(), /Stopped .* by Olive Operator \(ops@example\.com\): wrong price/);
    t.match(await page.locator('#campaign-audit').innerText(), /stop\s+Olive Operator[\s\S]*Reason:?\s*wrong price[\s\S]*Fan-outs:?\s*1/);
    t.equal(await page.getByRole('button', { name: 'Stop campaign' }).count(), 0, 'no stop button on a stopped campaign');

    const missing = await page.goto(`${platform.consoleUrl}/campaigns/never-sent`);
    t.equal(missing?.status(), 404);
  });

  await t.test('reject a held campaign: nothing is sent', async (t) => {
    const id = await heldCampaign(platform, 'winter');
    const page = await browser.page(t);
    await page.goto(`${platform.consoleUrl}/campaigns/winter`);
    await page.getByLabel('Reason (kept in the audit trail)').fill('not this week');
    await page.getByRole('button', { name: 'Reject' }).click();
    t.match(await page.locator('.flash.success').innerText(), /Rejected 1 request of winter\./);
    t.match(await page.locator('#campaign-fanouts tbody').innerText(), /rejected[\s\S]*rejected by Olive Operator/);
    const { rows } = await platform.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM deliveries WHERE notification_id = $1', [
      id,
    ]);
    t.equal(rows[0]!.n, 0, 'no delivery written');
  });

  await t.test('keyboard and labels on every page of it', async (t) => {
    const page = await browser.page(t);
    for (const path of ['/campaigns', '/campaigns?pending=true', '/campaigns/spring', '/campaigns/autumn'])
      await checkAccessible(t, page, `${platform.consoleUrl}${path}`);
  });
});
