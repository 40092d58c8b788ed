/** Signing in to the console in a browser, through identity's real sign-in page. */
import type { Page } from 'playwright-core';

export async function signIn(page: Page, consoleUrl: string, who: { email: string; password: string }, path = '/'): Promise<void> {
  await page.goto(`${consoleUrl}${path}`);
  // The console sent the browser to identity's sign-in page.
  await page.getByLabel('Email').fill(who.email);
  await page.getByLabel('Password').fill(who.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Signs in and waits until the console shows `path` (after identity's redirect and the console's refresh). */
export async function signInAsOperator(
  page: Page,
  consoleUrl: string,
  who: { email: string; password: string },
  path = '/',
): Promise<void> {
  await signIn(page, consoleUrl, who, path);
  await page.waitForURL((u) => u.origin === new URL(consoleUrl).origin && !u.pathname.startsWith('/auth/'));
}
