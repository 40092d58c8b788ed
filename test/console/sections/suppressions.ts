/**
 * The suppression list page against the real notifier (browser): an operator adds an address
 * (and a malformed one is refused beside the field), finds it by part of the address, and removes
 * it through the confirmation page; an entry a bounce made is listed with its reason.
 */
import type { Test } from 'tap';
import { type Platform, OPERATOR } from '../platform.js';
import { useBrowser } from '../browser.js';
import { signInAsOperator } from '../signin.js';
import { checkAccessible } from '../ops-a11y.js';

/** The page's subtests, on a platform the caller started (test/console/shared-platform.test.ts). */
export async function suppressionsPage(t: Test, platform: Platform): Promise<void> {
  await platform.db.pool.query(
    `INSERT INTO email_suppressions (address, reason, detail, provider, created_at)
     VALUES ('bounced@shop.test', 'bounce', 'a permanent bounce', 'ses', '2026-11-01T00:00:01Z')`,
  );
  const browser = await useBrowser(t);
  const listed = async (): Promise<string[]> =>
    (await platform.db.pool.query<{ address: string }>('SELECT address FROM email_suppressions ORDER BY address')).rows.map(
      (r) => r.address,
    );

  await t.test('add, search, remove after confirming', async (t) => {
    const page = await browser.page(t);
    await signInAsOperator(page, platform.consoleUrl, OPERATOR, '/suppressions');
    t.equal(await page.locator('main').getAttribute('data-page'), 'suppressions');
    t.match(await page.locator('#suppressions').innerText(), /bounced@shop\.test\s+permanent bounce/);

    // A malformed address: the notifier's refusal beside the field, the form kept.
    await page.getByLabel('E-mail address').fill('not-an-address');
    await page.getByRole('button', { name: 'Add to the suppression list' }).click();
    t.equal(await page.getByLabel('E-mail address').getAttribute('aria-invalid'), 'true');
    t.match(await page.locator('#f-address-error').innerText(), /must be an e-mail address/);
    t.equal(await page.getByLabel('E-mail address').inputValue(), 'not-an-address');

    await page.getByLabel('E-mail address').fill('Dan@Shop.test');
    await page.getByLabel('Note').fill('asked by phone');
    await page.getByRole('button', { name: 'Add to the suppression list' }).click();
    t.match(await page.locator('.flash.success').innerText(), /dan@shop\.test is on the suppression list/);
    t.same(await listed(), ['bounced@shop.test', 'dan@shop.test']);

    await page.getByLabel('Address contains').fill('@SHOP.test');
    await page.getByRole('button', { name: 'Search' }).click();
    const rows = page.locator('#suppressions tbody tr');
    t.equal(await rows.count(), 2);
    t.match(await rows.nth(1).innerText(), /dan@shop\.test\s+added by an operator\s+asked by phone\s+operator/);
    await page.getByLabel('Address contains').fill('nobody');
    await page.getByRole('button', { name: 'Search' }).click();
    t.match(await page.locator('main').innerText(), /No suppressed address matches/);

    await page.goto(`${platform.consoleUrl}/suppressions?q=dan`);
    await page.getByRole('link', { name: 'Remove dan@shop.test' }).click();
    t.equal(await page.locator('h1').innerText(), 'Remove from the suppression list?');
    t.same(await listed(), ['bounced@shop.test', 'dan@shop.test'], 'nothing removed by opening the confirmation');
    await page.getByRole('button', { name: 'Remove dan@shop.test' }).click();
    t.match(await page.locator('.flash.success').innerText(), /dan@shop\.test was removed/);
    t.same(await listed(), ['bounced@shop.test']);
  });

  await t.test('a remove without the CSRF token, or without a session, changes nothing', async (t) => {
    const url = `${platform.consoleUrl}/suppressions/bounced%40shop.test/remove`;
    // The signed-in browser's own cookies, but no token.
    const forged = await browser.context.request.post(url, { form: {}, headers: { origin: platform.consoleUrl }, maxRedirects: 0 });
    t.equal(forged.status(), 403);
    const anonymous = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: platform.consoleUrl },
      body: '',
      redirect: 'manual',
    });
    t.equal(anonymous.status, 303, 'no session: sent to sign in');
    t.same(await listed(), ['bounced@shop.test']);
  });

  await t.test('keyboard and labels on every page of it', async (t) => {
    const page = await browser.page(t);
    for (const path of ['/suppressions', '/suppressions/bounced%40shop.test/remove'])
      await checkAccessible(t, page, `${platform.consoleUrl}${path}`);
  });
}
