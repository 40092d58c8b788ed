/**
 * Signing in to the console (browser): the code flow through identity's real sign-in page, the
 * session cookie's attributes as the browser stored them, a customer refused, sign-out.
 */
import type { Test } from 'tap';
import { type Platform, CUSTOMER, OPERATOR } from '../platform.js';
import { useBrowser } from '../browser.js';
import { signIn, signInAsOperator } from '../signin.js';

/** The page's subtests, on a platform the caller started (test/console/shared-platform.test.ts). */
export async function signInPage(t: Test, platform: Platform): Promise<void> {
  const browser = await useBrowser(t);

  await t.test('an operator signs in through identity and lands where they were going', async (t) => {
    const page = await browser.page(t);
    await page.goto(`${platform.consoleUrl}/quotas`);
    t.equal(new URL(page.url()).origin, platform.identityUrl, 'an anonymous visit goes to identity to sign in');
    t.equal(new URL(page.url()).searchParams.get('code_challenge_method'), 'S256', 'with PKCE S256');
    await signInAsOperator(page, platform.consoleUrl, OPERATOR, '/quotas');
    t.equal(new URL(page.url()).pathname, '/quotas', 'back on the page asked for');
    t.equal(await page.locator('main').getAttribute('data-page'), 'quotas');
    t.match(await page.locator('header').innerText(), /Signed in as Olive Operator \(admin\)/);
    t.equal(await page.locator('nav[aria-label="Console"] a[aria-current="page"]').innerText(), 'Quotas', 'the nav marks the page');

    const cookies = await browser.context.cookies(platform.consoleUrl);
    const session = cookies.find((c) => c.name === 'console_session');
    t.ok(session, 'a session cookie');
    t.equal(session?.httpOnly, true, 'HttpOnly');
    t.equal(session?.sameSite, 'Lax', 'SameSite=Lax');
    t.equal(session?.secure, false, 'not Secure over plain http');
    t.notOk(
      cookies.some((c) => c.value.includes('.') && c.value.split('.').length === 3),
      'no token (JWT) in any cookie',
    );
    t.equal(platform.console.sessions.size, 1, 'one session held server-side');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${platform.consoleUrl}/auth/signed-out`);
    t.equal(platform.console.sessions.size, 0, 'the session is gone');
    await page.goto(`${platform.consoleUrl}/quotas`);
    t.equal(new URL(page.url()).origin, platform.identityUrl, 'signed out: back to identity');
  });

  await t.test('a customer is refused: the console is for admins', async (t) => {
    const page = await browser.page(t);
    await browser.context.clearCookies();
    await signIn(page, platform.consoleUrl, CUSTOMER);
    await page.waitForURL((u) => u.pathname === '/auth/callback');
    t.equal(await page.locator('h1').innerText(), 'Not an operator');
    t.match(await page.locator('main').innerText(), /role is\s+customer/);
    t.equal(platform.console.sessions.size, 0, 'no session for a customer');
  });
}
