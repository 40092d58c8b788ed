/**
 * The console's own pages, each one's main task in a browser against the real services:
 *
 * - quotas: search by subject, edit (the console's validation and the control plane's, each beside
 *   its field), save, and see the sidecar that acked the new version;
 * - notifications: a user's, per channel with the reason for a failure;
 * - dead letters: the e-mail queue, re-drive the entry ticked;
 * - templates: versions, locale variants, a rendered preview of every channel;
 * - notification types: the catalogue and a type's policy per tier.
 */
import t from 'tap';
import type { Page } from 'playwright-core';
import { useSidecar } from '../harness/services.js';
import { waitFor } from '../harness/wait.js';
import { SERVICE_HEADERS, call } from '../identity/notify/helpers.js';
import { useBrowser } from './browser.js';
import { CP_ADMIN_TOKEN, OPERATOR, startPlatform } from './platform.js';
import { signInAsOperator } from './signin.js';

t.test('the console pages', async (t) => {
  const p = await startPlatform(t, 'console_pages');
  const browser = await useBrowser(t);
  const cp = (method: string, path: string, body?: unknown) =>
    call(`${p.controlPlaneUrl}${path}`, method, body, { authorization: `Bearer ${CP_ADMIN_TOKEN}` });
  const notifier = (method: string, path: string, body?: unknown) => call(`${p.notifierUrl}${path}`, method, body, SERVICE_HEADERS);

  // A sidecar following the control plane, to ack quota versions.
  await useSidecar(t, { LIMITER_CONTROL_PLANE_URL: p.controlPlaneGrpc, SIDECAR_ID: 'sidecar-console-test' });
  await waitFor(async () => ((await cp('GET', '/internal/sidecars')).json?.sidecars as unknown[] | undefined)?.length === 1, {
    timeoutMs: 15_000,
    what: 'the sidecar connected to the control plane',
  });
  for (const [subject, rate] of [
    ['user:42', 10],
    ['user:43', 11],
    ['tenant:acme', 100],
  ] as const) {
    const r = await cp('PUT', `/internal/subjects/${encodeURIComponent(subject)}/quota`, {
      algorithm: 'token_bucket',
      rate,
      burst: rate,
      unit: 'minute',
    });
    t.equal(r.status, 201, `a quota for ${subject}`);
  }

  // A template in two locales, a user who gets an e-mail, and one whose address always fails
  // (the sandbox answers fault-unavailable@ with a temporary error until retries run out).
  t.equal(
    (
      await notifier('PUT', '/api/v1/admin/templates/order_shipped_v1', {
        default_locale: 'en',
        variants: {
          en: {
            email: { subject: 'Order {{order_id}} shipped', text: 'Arriving {{eta}}' },
            push: { title: 'Shipped', body: 'Order {{order_id}}' },
          },
          fr: {
            email: { subject: 'Commande {{order_id}} expédiée', text: 'Arrivée {{eta}}' },
            push: { title: 'Expédiée', body: 'Commande {{order_id}}' },
          },
        },
      })
    ).status,
    201,
  );
  await notifier('PUT', '/api/v1/users/ana/profile', { email: 'ana@example.com', locale: 'en' });
  await notifier('PUT', '/api/v1/users/bo/profile', { email: 'fault-unavailable@example.com', locale: 'en' });
  const send = async (user: string) => {
    const r = await notifier('POST', '/api/v1/notifications', {
      event_type: 'order.shipped',
      recipient_id: user,
      template_id: 'order_shipped_v1',
      template_data: { order_id: 'A-1', eta: 'Tuesday' },
      priority: 'normal',
      channels: ['email'],
    });
    t.equal(r.status, 202, `a notification to ${user}`);
    return String(r.json?.notification_id);
  };
  const toAna = await send('ana');
  const toBo = await send('bo');
  let last = '';
  await waitFor(
    async () => {
      const r = await notifier('GET', `/api/v1/notifications/${toBo}/status`);
      last = r.text;
      return r.status === 200 && r.json?.status === 'dead_lettered';
    },
    { timeoutMs: 30_000, what: `bo's e-mail dead-lettered (last: ${last})` },
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}; last status: ${last}`);
  });
  let page: Page;
  await t.test('sign in', async (t) => {
    page = await browser.page(t);
    await signInAsOperator(page, p.consoleUrl, OPERATOR, '/quotas');
    t.equal(await page.locator('main').getAttribute('data-page'), 'quotas');
  });

  await t.test('quotas: search, edit with validation, save and see the acks', async (t) => {
    const page = await browser.page(t);
    await page.goto(`${p.consoleUrl}/quotas`);
    t.equal(await page.locator('#quotas tbody tr').count(), 3, 'every record listed');
    await page.getByLabel('Kind').selectOption('user');
    await page.getByLabel('Subject starts with').fill('user:42');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(/prefix=user%3A42/);
    t.equal(await page.locator('#quotas tbody tr').count(), 1, 'one record matches');
    await page.getByRole('link', { name: 'user:42' }).click();
    t.equal(await page.locator('h1').innerText(), 'Quota of user:42');
    t.match(await page.locator('#sidecars').innerText(), /sidecar-console-test/, 'the connected sidecar is listed');

    // The console's own check: a rate that is not a whole number stays in the form, explained.
    await page.locator('#f-rate').fill('1.5');
    await page.getByRole('button', { name: 'Save quota' }).click();
    await page.waitForLoadState();
    t.equal(await page.locator('#f-rate').getAttribute('aria-invalid'), 'true', 'the rate is marked invalid');
    t.match(await page.locator('#f-rate-error').innerText(), /whole number/);
    t.equal(await page.locator('#f-rate').inputValue(), '1.5', 'what was typed is kept');

    // The control plane's check: approximate accuracy needs a token or leaky bucket.
    await page.locator('#f-rate').fill('20');
    await page.getByLabel('Algorithm').selectOption('sliding_window');
    await page.getByLabel('Accuracy').selectOption('approximate');
    await page.getByRole('button', { name: 'Save quota' }).click();
    await page.waitForLoadState();
    t.equal(
      await page.getByLabel('Accuracy').getAttribute('aria-invalid'),
      'true',
      "the control plane's refusal is beside the field it names",
    );
    t.match(await page.locator('.problem').innerText(), /invalid_field/);

    await page.getByLabel('Algorithm').selectOption('token_bucket');
    await page.getByLabel('Accuracy').selectOption('exact');
    await page.getByRole('button', { name: 'Save quota' }).click();
    await page.waitForURL(`${p.consoleUrl}/quotas/s/user%3A42`);
    const flash = await page.locator('.flash.success').innerText();
    t.match(flash, /Saved version \d+ of user:42\. Acked by sidecar-console-test\./, 'the save names the sidecar that acked it');
    t.match(await page.locator('dl.details').innerText(), /20 \/ minute/, 'the stored record shows the new rate');
    // README's screenshot (docs/console.png): CONSOLE_SCREENSHOT=docs/console.png npm test -- test/console/pages.test.ts
    const shot = process.env['CONSOLE_SCREENSHOT'];
    if (shot) await page.screenshot({ path: shot, fullPage: false });
    const stored = await cp('GET', '/internal/subjects/user%3A42/quota');
    t.equal((stored.json?.quota as { rate: number }).rate, 20, 'the control plane has it');
  });

  await t.test("notifications: a user's, per channel with why", async (t) => {
    const page = await browser.page(t);
    await page.goto(`${p.consoleUrl}/notifications`);
    await page.getByLabel('or a user id').fill('bo');
    await page.getByRole('button', { name: 'Look up' }).click();
    await page.waitForURL(/user=bo/);
    const table = page.locator(`#channels-${toBo}`);
    t.match(await table.innerText(), /email\s+dead lettered/, 'the e-mail channel is dead-lettered');
    t.ok(await table.getByRole('link', { name: 'In the email dead-letter queue' }).isVisible(), 'with a way to the queue');

    await page.getByLabel('Notification id').fill(toAna);
    await page.getByLabel('or a user id').fill('');
    await page.getByRole('button', { name: 'Look up' }).click();
    await page.waitForURL(new RegExp(`id=${toAna}`));
    t.match(await page.locator(`#channels-${toAna}`).innerText(), /email\s+(sent|delivered)/, "ana's e-mail went out");
  });

  await t.test('dead letters: re-drive the entry ticked', async (t) => {
    const page = await browser.page(t);
    await page.goto(`${p.consoleUrl}/dlq`);
    await page.getByRole('link', { name: 'email', exact: true }).click();
    await page.waitForURL(/channel=email/);
    t.equal(await page.locator('#dead-letters tbody tr').count(), 1, 'one open entry');
    t.match(await page.locator('#dead-letters').innerText(), /retries_exhausted/, 'with why it gave up');
    await page.locator('#dead-letters input[name="ids"]').check();
    await page.getByRole('button', { name: 'Re-drive selected' }).click();
    await page.waitForURL(/channel=email/);
    t.equal(await page.locator('.flash.success').innerText(), '1 re-driven.');
  });

  await t.test('templates: versions, locale variants and a preview of every channel', async (t) => {
    const page = await browser.page(t);
    await page.goto(`${p.consoleUrl}/templates`);
    await page.getByRole('link', { name: 'order_shipped_v1' }).click();
    t.equal(await page.locator('h1').innerText(), 'Template order_shipped_v1');
    t.ok(await page.getByRole('heading', { name: 'en (default)' }).isVisible(), 'the default variant');
    t.ok(await page.getByRole('heading', { name: 'fr', exact: true }).isVisible(), 'the French variant');
    await page.getByLabel('Locale').selectOption('fr');
    await page.getByLabel('Sample data').fill('order_id=B-7\neta=mardi');
    await page.getByRole('button', { name: 'Render every channel' }).click();
    await page.waitForLoadState();
    t.match(
      await page.locator('[data-channel="email"]').innerText(),
      /Commande B-7 expédiée[\s\S]*Arrivée mardi/,
      'the e-mail, rendered in French',
    );
    t.match(await page.locator('[data-channel="push"]').innerText(), /Expédiée[\s\S]*Commande B-7/, 'the push, rendered');
  });

  await t.test('keyboard and labels: a skip link first, every control labelled, every table headed', async (t) => {
    const page = await browser.page(t);
    for (const path of [
      '/quotas',
      '/quotas/s/user%3A42',
      '/quotas/new',
      `/notifications?user=bo`,
      '/dlq?channel=email&all=true',
      '/templates/order_shipped_v1',
      '/types',
    ]) {
      await page.goto(`${p.consoleUrl}${path}`);
      await page.keyboard.press('Tab');
      t.equal(
        await page.evaluate('document.activeElement && document.activeElement.textContent'),
        'Skip to content',
        `${path}: the first Tab reaches the skip link`,
      );
      await page.keyboard.press('Enter');
      t.equal(
        await page.evaluate('document.activeElement && document.activeElement.id'),
        'main',
        `${path}: which moves focus to the content`,
      );
      // The page's DOM is read in the browser (this project's TypeScript has no DOM types: a string).
      const unlabelled = await page.evaluate(`[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
        .filter((el) => !el.getAttribute('aria-label') && !(el.tagName === 'BUTTON' && el.textContent.trim()) && !(el.labels && el.labels.length > 0))
        .map((el) => el.outerHTML.slice(0, 80))`);
      t.same(unlabelled, [], `${path}: every control has a label`);
      const headless = await page.evaluate(
        "[...document.querySelectorAll('table')].filter((tb) => !tb.querySelector('caption') || !tb.querySelector('th[scope]')).length",
      );
      t.equal(headless, 0, `${path}: every table has a caption and scoped headers`);
    }
  });

  await t.test('notification types: the catalogue and a policy per tier', async (t) => {
    const page = await browser.page(t);
    await page.goto(`${p.consoleUrl}/types`);
    const security = page.locator('[data-type="security_alerts"]');
    t.match(await security.innerText(), /Mandatory\s+yes/, 'security alerts are mandatory');
    t.equal(await security.locator('tbody tr').count(), 4, 'a policy row per tier');
  });
});
