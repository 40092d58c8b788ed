/**
 * The OAuth clients page against the real identity service (browser): an operator registers a
 * confidential client (a refused redirect URI shown beside its field first), sees its secret once
 * on the answer page and never on the client's page, and replaces it after confirming; each
 * secret is checked at identity's token endpoint (the old one stops working at once).
 */
import type { Test } from 'tap';
import { type Platform, OPERATOR } from '../platform.js';
import { useBrowser } from '../browser.js';
import { signInAsOperator } from '../signin.js';
import { checkAccessible } from '../ops-a11y.js';

/** A client-credentials token request with this secret: identity's status. */
async function tokenStatus(identityUrl: string, clientId: string, secret: string): Promise<number> {
  const res = await fetch(`${identityUrl}/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`,
    },
    body: 'grant_type=client_credentials',
  });
  await res.arrayBuffer();
  return res.status;
}

/** The page's subtests, on a platform the caller started (test/console/shared-platform.test.ts). */
export async function clientsPage(t: Test, platform: Platform): Promise<void> {
  const browser = await useBrowser(t);

  await t.test('register a confidential client: the secret once; replace it after confirming', async (t) => {
    const page = await browser.page(t);
    await signInAsOperator(page, platform.consoleUrl, OPERATOR, '/clients');
    t.equal(await page.locator('main').getAttribute('data-page'), 'clients');
    t.match(await page.locator('#clients').innerText(), /console/, "the console's own client is listed");

    await page.getByLabel('Client type').selectOption('confidential');
    await page.getByLabel('Client id').fill('billing-test');
    await page.getByLabel('Redirect URIs').fill('http://evil.example/cb');
    await page.getByLabel('Scopes').fill('read:orders');
    await page.getByRole('button', { name: 'Register client' }).click();
    t.equal(await page.getByLabel('Redirect URIs').getAttribute('aria-invalid'), 'true', 'the refused URI is marked');
    t.match(await page.locator('#f-redirect_uris-error').innerText(), /loopback/);
    t.equal(await page.getByLabel('Client id').inputValue(), 'billing-test', 'the form comes back as typed');

    await page.getByLabel('Redirect URIs').fill('');
    await page.getByRole('button', { name: 'Register client' }).click();
    t.equal(await page.locator('h1').innerText(), 'Client billing-test registered');
    const secret = (await page.locator('#client-secret').innerText()).trim();
    t.match(secret, /^[A-Za-z0-9_-]{20,}$/, 'the secret is on the answer page');
    t.equal(await tokenStatus(platform.identityUrl, 'billing-test', secret), 200, 'and it works');

    await page.getByRole('link', { name: /back to the client/ }).click();
    t.equal(new URL(page.url()).pathname, '/clients/billing-test');
    t.notOk((await page.content()).includes(secret), 'never shown again');
    t.match(await page.locator('main').innerText(), /client_secret_basic/);

    // Without the confirmation, nothing is replaced.
    await page.getByRole('button', { name: 'Replace secret' }).click();
    t.match(await page.locator('.field-error').innerText(), /Tick the box/);
    t.equal(await tokenStatus(platform.identityUrl, 'billing-test', secret), 200, 'the secret still works');

    await page.getByLabel('Yes, replace the secret of billing-test now').check();
    await page.getByRole('button', { name: 'Replace secret' }).click();
    t.equal(await page.locator('h1').innerText(), 'New secret for billing-test');
    const next = (await page.locator('#client-secret').innerText()).trim();
    t.not(next, secret);
    t.equal(await tokenStatus(platform.identityUrl, 'billing-test', secret), 401, 'the old secret stopped working');
    t.equal(await tokenStatus(platform.identityUrl, 'billing-test', next), 200, 'the new one works');
  });

  await t.test(
    'the answer page with a secret is not stored by the browser; an unknown client is a 404 page; a client may be called new',
    async (t) => {
      const page = await browser.page(t);
      await page.goto(`${platform.consoleUrl}/clients`);
      await page.getByLabel('Client id').fill('svc-2');
      const [res] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith('/clients') && r.request().method() === 'POST'),
        page.getByRole('button', { name: 'Register client' }).click(),
      ]);
      t.equal(res.status(), 200);
      t.match(res.headers()['cache-control'], /no-store/);
      await page.goto(`${platform.consoleUrl}/clients`);
      await page.getByLabel('Client id').fill('new');
      await page.getByRole('button', { name: 'Register client' }).click();
      await page.getByRole('link', { name: /back to the client/ }).click();
      t.equal(await page.locator('h1').innerText(), 'Client new', 'its page is /clients/new');
      const missing = await page.goto(`${platform.consoleUrl}/clients/nobody`);
      t.equal(missing?.status(), 404);
      t.equal(await page.locator('h1').innerText(), 'No such client');
    },
  );

  await t.test('keyboard and labels on every page of it', async (t) => {
    const page = await browser.page(t);
    for (const path of ['/clients', '/clients/billing-test', '/clients/new'])
      await checkAccessible(t, page, `${platform.consoleUrl}${path}`);
  });
}
