/**
 * The console's home and the pages issue 27 corrected, in a browser against the real services:
 *
 * - the overview: the scraper reads every service's /metrics and the sidecar's (every second
 *   here), and the page shows a dead letter, a campaign awaiting approval, no sidecar behind, no
 *   breaker open, no sidecar failing open, and the deny ratio's chart after refused requests, each
 *   linking to the page that acts on it; no inline script or style (the CSP stays strict);
 * - recent activity: everyone's latest notifications with their per-channel states, filtered by
 *   channel and state, and by type; a recipient known to identity shown by name, the id on hover;
 * - the dead-letter table at 1,280 px: ids and dates on one line, no sideways scroll, select-all;
 * - a held campaign's approval sentence.
 *
 * `CONSOLE_DOCS_SHOTS=docs/console npm test -- test/console/overview.test.ts` retakes the
 * README's screenshots (Chromium, 1,280 px wide).
 */
import { join } from 'node:path';
import t from 'tap';
import type { Page } from 'playwright-core';
import { freePort } from '../harness/ports.js';
import { useSidecar } from '../harness/services.js';
import { waitFor } from '../harness/wait.js';
import { SERVICE_HEADERS, call } from '../identity/notify/helpers.js';
import { useBrowser } from './browser.js';
import { checkAccessible } from './ops-a11y.js';
import { CP_ADMIN_TOKEN, OPERATOR, startPlatform } from './platform.js';
import { signInAsOperator } from './signin.js';

const SHOTS = process.env['CONSOLE_DOCS_SHOTS'];
const WIDTH = 1280;

async function shoot(page: Page, name: string): Promise<void> {
  if (SHOTS) await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

t.test('the overview, recent activity and the corrected pages', async (t) => {
  const sidecarAdminPort = await freePort();
  const p = await startPlatform(
    t,
    'console_overview',
    { CONSOLE_SCRAPE_INTERVAL: '1s', CONSOLE_SIDECAR_METRICS_URL: `http://127.0.0.1:${sidecarAdminPort}/metrics` },
    { NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD: '2', NOTIFIER_CAMPAIGN_SHARD_SIZE: '100' },
  );
  const sidecar = await useSidecar(t, {
    LIMITER_CONTROL_PLANE_URL: p.controlPlaneGrpc,
    SIDECAR_ID: 'sidecar-overview',
    LIMITER_ADMIN_PORT: String(sidecarAdminPort),
  });
  const browser = await useBrowser(t);
  // A quota, so the table has a version for the sidecar to ack (the control plane lists it by id then).
  const quota = await call(
    `${p.controlPlaneUrl}/internal/subjects/${encodeURIComponent('user:42')}/quota`,
    'PUT',
    { algorithm: 'token_bucket', rate: 10, burst: 10, unit: 'minute' },
    { authorization: `Bearer ${CP_ADMIN_TOKEN}` },
  );
  t.equal(quota.status, 201, 'a quota');
  const notifier = (method: string, path: string, body?: unknown) => call(`${p.notifierUrl}${path}`, method, body, SERVICE_HEADERS);
  const scraper = p.console.scraper!;
  t.ok(scraper, 'the console scrapes');

  // A delivered e-mail, a dead-lettered one, an in-app message to a user identity knows, and a
  // campaign held for approval (3 members over a threshold of 2).
  t.equal(
    (
      await notifier('PUT', '/api/v1/admin/templates/order_shipped_v1', {
        default_locale: 'en',
        variants: { en: { email: { subject: 'Order {{order_id}} shipped', text: 'Soon' }, in_app: { title: 'Shipped', body: 'Soon' } } },
      })
    ).status,
    201,
  );
  await notifier('PUT', '/api/v1/users/ana/profile', { email: 'ana@example.com', locale: 'en' });
  await notifier('PUT', '/api/v1/users/bo/profile', { email: 'fault-unavailable@example.com', locale: 'en' });
  const send = async (user: string, channels: string[]) => {
    const r = await notifier('POST', '/api/v1/notifications', {
      event_type: 'order.shipped',
      recipient_id: user,
      template_id: 'order_shipped_v1',
      template_data: { order_id: 'A-1' },
      priority: 'normal',
      channels,
    });
    t.equal(r.status, 202, `a notification to ${user}`);
    return String(r.json?.notification_id);
  };
  await send('ana', ['email']);
  const toBo = await send('bo', ['email']);
  const toCarl = await send(p.customerId, ['in_app']);
  await waitFor(async () => (await notifier('GET', `/api/v1/notifications/${toBo}/status`)).json?.status === 'dead_lettered', {
    timeoutMs: 30_000,
    what: "bo's e-mail dead-lettered",
  });
  t.equal(
    (
      await notifier('PUT', '/api/v1/admin/templates/promo_v1', {
        default_locale: 'en',
        variants: { en: { push: { title: 'Spring', body: 'Code {{code}}' } } },
      })
    ).status,
    201,
  );
  const upload = await fetch(`${p.notifierUrl}/api/v1/admin/segments/vip/members`, {
    method: 'PUT',
    headers: { ...SERVICE_HEADERS, 'x-subject-role': 'admin', 'x-subject': 'user:setup', 'content-type': 'application/x-ndjson' },
    body: ['m1', 'm2', 'm3'].map((m) => JSON.stringify(m)).join('\n'),
  });
  t.equal(upload.status, 201, 'the vip segment');
  const held = await notifier('POST', '/api/v1/notifications', {
    event_type: 'marketing.spring',
    audience: { segment: 'vip' },
    campaign_id: 'spring',
    template_id: 'promo_v1',
    template_data: { code: 'SPRING' },
    priority: 'low',
    channels: ['push'],
  });
  t.equal(held.status, 202, 'the campaign request');

  // Refused requests at the sidecar: an unknown API key is answered by the decoy (429).
  await waitFor(() => scraper.latest?.targets.some((x) => x.kind === 'sidecar' && x.up) === true, {
    timeoutMs: 20_000,
    what: 'the sidecar scraped once',
  });
  for (let i = 0; i < 4; i++) {
    const r = await fetch(`${sidecar.url}/api/v1/notifications`, { headers: { 'x-api-key': `unknown-key-${i}` } });
    await r.arrayBuffer();
    t.equal(r.status, 429, `an unknown key is refused (${r.status})`);
  }
  await waitFor(
    () => {
      const v = scraper.latest?.signals.values;
      return v?.dlq_depth === 1 && v.campaigns_pending === 1 && scraper.history.points('deny_ratio').some((x) => x.v !== null && x.v > 0);
    },
    { timeoutMs: 30_000, what: 'the scraper saw the dead letter, the held campaign and the refusals' },
  );

  await t.test('overview: what needs attention, with charts and links', async (t) => {
    const page = await browser.page(t);
    await page.setViewportSize({ width: WIDTH, height: 900 });
    await signInAsOperator(page, p.consoleUrl, OPERATOR, '/');
    t.equal(await page.locator('main').getAttribute('data-page'), 'overview', 'the home page is the overview');
    t.equal(await page.locator('nav [aria-current="page"]').innerText(), 'Overview');
    const card = (signal: string) => page.locator(`[data-signal="${signal}"]`);
    t.equal(await card('dlq_depth').locator('.value').innerText(), '1', 'one dead letter');
    t.match(await card('dlq_depth').getAttribute('class'), /attention/, 'marked as needing attention');
    t.equal(await card('dlq_depth').getByRole('link').getAttribute('href'), '/dlq');
    t.equal(await card('campaigns_pending').locator('.value').innerText(), '1', 'one campaign waits');
    t.equal(await card('campaigns_pending').getByRole('link').getAttribute('href'), '/campaigns?pending=true');
    t.equal(await card('sidecars_behind').locator('.value').innerText(), '0', 'the sidecar acked the table');
    t.notMatch(await card('sidecars_behind').getAttribute('class'), /attention/);
    t.equal(await card('breakers_open').locator('.value').innerText(), '0');
    t.equal(await card('fail_open').locator('.value').innerText(), '0');
    t.match(await card('deny_ratio').locator('.value').innerText(), /^(\d+(\.\d)? %|no decisions)$/);
    for (const signal of ['dlq_depth', 'campaigns_pending', 'sidecars_behind', 'breakers_open', 'fail_open', 'deny_ratio']) {
      const points = Number(await card(signal).locator('svg.chart').getAttribute('data-points'));
      t.ok(points >= 1, `${signal}: a chart over the last hour (${points} points)`);
    }
    // The deny ratio needs attention only while the latest scrape interval still holds the refusals
    // above, which depends on when the page is read: the summary must agree with its card either way.
    const denyNeedsAttention = /attention/.test((await card('deny_ratio').getAttribute('class')) ?? '');
    t.match(
      await page.locator('.summary').innerText(),
      denyNeedsAttention
        ? /3 things need attention: dead letters, campaigns awaiting approval, deny ratio\./
        : /2 things need attention: dead letters, campaigns awaiting approval\./,
    );
    const targets = await page.locator('#scrape-targets tbody').innerText();
    for (const name of ['control-plane', 'notifier', 'identity', 'sidecar-overview'])
      t.match(targets, new RegExp(`${name}[\\s\\S]*?answered`), `${name} scraped`);
    t.equal(await page.locator('#overview').getAttribute('data-refresh'), '5', 'reloads itself (at most every 5 s)');
    // The CSP allows no inline script or style: the charts are plain SVG coloured by the stylesheet.
    t.equal(await page.evaluate("document.querySelectorAll('[style], style, script:not([src])').length"), 0, 'nothing inline');
    const res = await page.request.get(`${p.consoleUrl}/`);
    t.match(res.headers()['content-security-policy'] ?? '', /script-src 'self'; style-src 'self'; img-src 'self' data:/);
    await shoot(page, 'overview');

    await card('campaigns_pending').getByRole('link', { name: 'Approve or reject' }).click();
    await page.waitForURL(/\/campaigns\?pending=true$/);
    t.match(await page.locator('#campaigns').innerText(), /spring[\s\S]*waiting for approval/);
    await page.getByRole('link', { name: 'spring' }).click();
    t.equal(await page.locator('#campaign-state').innerText(), 'waiting for approval');
    t.match(
      await page.locator('#approval-text').innerText(),
      /^1 request of this campaign is held: its segment has more members than the notifier's approval threshold \(NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD\)\. Approving sends to 3 recipients;/,
    );
    await shoot(page, 'campaign');
  });

  await t.test('recent activity: per-channel states, filters, people by name', async (t) => {
    const page = await browser.page(t);
    await page.setViewportSize({ width: WIDTH, height: 900 });
    await page.goto(`${p.consoleUrl}/activity`);
    t.equal(await page.locator('main').getAttribute('data-page'), 'activity');
    const rows = page.locator('#activity tbody tr');
    t.equal(await rows.count(), 4, 'every notification: three to users and the campaign request');
    const carl = rows.filter({ hasText: 'Carl Customer' });
    t.equal(await carl.count(), 1, 'a recipient identity knows is shown by name');
    t.equal(await carl.locator('[data-subject]').getAttribute('data-subject'), p.customerId);
    t.match(await carl.locator('.person').getAttribute('title'), new RegExp(p.customerId), 'with the id on hover');
    t.match(await carl.locator('[data-channel="in_app"]').innerText(), /in_app:\s*\S/, 'its in-app state');
    t.match(await rows.filter({ hasText: 'campaign' }).innerText(), /campaign spring/, 'the audience request links its campaign');
    t.equal(await page.locator('#activity-feed').getAttribute('data-refresh'), '15', 'the newest page follows');
    await shoot(page, 'activity');

    await page.getByLabel('Channel').selectOption('email');
    await page.getByLabel('State').selectOption('dead_lettered');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/channel=email/);
    t.match(page.url(), /state=dead_lettered/);
    t.equal(await rows.count(), 1, "only bo's e-mail");
    t.match(await rows.first().innerText(), /bo[\s\S]*email:\s*dead lettered/);
    await rows.first().getByRole('link').first().click();
    await page.waitForURL(new RegExp(`id=${toBo}`));
    t.equal(await page.locator('main').getAttribute('data-page'), 'notifications', 'a row opens the notification');

    const type = (await p.db.pool.query<{ t: string }>('SELECT notification_type AS t FROM notifications WHERE id = $1', [toCarl])).rows[0]!
      .t;
    await page.goto(`${p.consoleUrl}/activity`);
    await page.getByLabel('Notification type').selectOption(type);
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/type=/);
    t.equal(await rows.count(), 3, `the three order notifications are ${type}; the campaign's is not`);
    await page.getByLabel('State').selectOption('delivered');
    await page.getByLabel('Notification type').selectOption('');
    await page.getByLabel('Channel').selectOption('sms');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/channel=sms/);
    t.match(await page.locator('main .empty').innerText(), /No notification matches these filters/);
  });

  await t.test('dead letters at 1,280 px: ids and dates on one line, select-all', async (t) => {
    const page = await browser.page(t);
    await page.setViewportSize({ width: WIDTH, height: 800 });
    await page.goto(`${p.consoleUrl}/dlq`);
    const table = page.locator('#dead-letters');
    t.equal(await table.locator('tbody tr').count(), 1);
    const overflow = await page.evaluate<number>(
      "(() => { const w = document.querySelector('#dead-letters').closest('.table-wrap'); return w.scrollWidth - w.clientWidth; })()",
    );
    t.ok(overflow <= 0, `the table fits without scrolling sideways (${overflow} px over)`);
    // One line each: every piece of an id or date cell sits on one line (an inline element that
    // wraps has more than one box; pieces on two lines have different tops).
    const tall = await page.evaluate(`[...document.querySelectorAll('#dead-letters td.nowrap, #dead-letters th.nowrap')]
      .filter((c) => {
        const parts = [...c.querySelectorAll('*')].filter((e) => e.getClientRects().length > 0);
        if (parts.some((e) => e.getClientRects().length > 1)) return true;
        const tops = parts.map((e) => e.getBoundingClientRect().top);
        return tops.length > 1 && Math.max(...tops) - Math.min(...tops) > 6;
      })
      .map((c) => c.textContent.trim())`);
    t.same(tall, [], 'no id or date wraps');
    const rowHeight = await page.evaluate<number>("document.querySelector('#dead-letters tbody tr').getBoundingClientRect().height");
    t.ok(rowHeight < 80, `the entry's row is at most a few lines high (${rowHeight} px), not one word per line`);
    const pick = table.locator('tbody input[name="ids"]');
    await page.locator('#pick-all').check();
    t.ok(await pick.first().isChecked(), 'select-all ticks every entry');
    await page.locator('#pick-all').uncheck();
    t.notOk(await pick.first().isChecked(), 'and unticks them');
    await shoot(page, 'dlq');
  });

  await t.test('keyboard and labels on the new pages', async (t) => {
    const page = await browser.page(t);
    for (const path of ['/', '/activity', '/activity?channel=email&state=failed', '/dlq'])
      await checkAccessible(t, page, `${p.consoleUrl}${path}`);
  });
});
