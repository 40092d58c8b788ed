/**
 * The provider weights page against the real notifier with a new push provider configured
 * (browser): the channels and their providers as the notifier has them, a split that does not add
 * up refused beside the weights, a 95/5 ramp applied (the notifier's live view and its audit say
 * so), and the history page listing the change with who made it.
 */
import t from 'tap';
import { startPlatform, OPERATOR } from './platform.js';
import { useBrowser } from './browser.js';
import { signInAsOperator } from './signin.js';
import { checkAccessible } from './ops-a11y.js';

t.test('the provider weights page', async (t) => {
  const platform = await startPlatform(
    t,
    'console_providers',
    {},
    { FCM_RAMP_NAME: 'fcm-v2', FCM_RAMP_URL: 'http://127.0.0.1:9/providers/fcm-v2' },
  );
  const browser = await useBrowser(t);
  const ramp = async () =>
    (await platform.db.pool.query<{ weight: number; shadow: number }>(`SELECT weight, shadow FROM provider_ramps WHERE channel = 'push'`))
      .rows[0];

  await t.test('ramp the new push provider to 5%, after a split that does not add up', async (t) => {
    const page = await browser.page(t);
    await signInAsOperator(page, platform.consoleUrl, OPERATOR, '/providers');
    t.equal(await page.locator('main').getAttribute('data-page'), 'providers');
    t.match(await page.locator('#providers-push').innerText(), /fcm\s+old\s+100%[\s\S]*fcm-v2\s+new\s+0%/);
    t.match(await page.locator('section[data-channel="sms"]').innerText(), /nothing to ramp/, 'no new SMS provider: no form');

    const push = page.getByRole('form', { name: 'Push weights' });
    await push.getByLabel('fcm (old)').fill('90');
    await push.getByLabel('fcm-v2 (new)').fill('5');
    await push.getByRole('button', { name: 'Apply to every replica' }).click();
    t.match(await page.locator('#push-weights-error').innerText(), /must add up to 100/);
    t.equal(await page.getByLabel('fcm (old)').inputValue(), '90', 'the form comes back as typed');
    t.equal(await ramp(), undefined, 'nothing stored');

    await page.getByLabel('fcm (old)').fill('95');
    await page.getByLabel('fcm-v2 (new)').fill('5');
    await page.locator('#f-push-shadow').fill('10');
    await page.getByRole('button', { name: 'Apply to every replica' }).first().click();
    t.match(await page.locator('.flash.success').innerText(), /Push: fcm 95%, fcm-v2 5%; shadow 10%/);
    t.match(await page.locator('#providers-push').innerText(), /fcm\s+old\s+95%[\s\S]*fcm-v2\s+new\s+5%/);
    t.same(await ramp(), { weight: 500, shadow: 1000 }, 'stored in buckets (percent × 100)');
    t.match(
      await page.locator('section[data-channel="push"]').innerText(),
      /Last changed[\s\S]*by Olive Operator \(ops@example\.com\)/,
      'who changed it, by name',
    );
    t.equal(
      await page.locator('section[data-channel="push"] .person').getAttribute('title'),
      `user:${platform.operatorId}`,
      'the id on hover',
    );

    await page.getByRole('link', { name: 'History of push changes' }).click();
    const rows = await page.locator('#ramp-changes tbody tr').allInnerTexts();
    t.equal(rows.length, 1);
    t.match(rows[0], /Olive Operator \(ops@example\.com\)\s+0% → 5%\s+0% → 10%/);
  });

  await t.test('keyboard and labels on every page of it', async (t) => {
    const page = await browser.page(t);
    for (const path of ['/providers', '/providers/push/history']) await checkAccessible(t, page, `${platform.consoleUrl}${path}`);
  });
});
