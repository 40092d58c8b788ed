/**
 * The accessibility checks the operations pages' browser tests run on each of their pages (the
 * same as pages.test.ts runs on the core's): the first Tab reaches the skip link and Enter moves
 * focus to the content; every control has a label (or an aria-label, or is a button with text);
 * every table has a caption and scoped headers.
 */
import type { Page } from 'playwright-core';
import type { Test } from 'tap';

export async function checkAccessible(t: Test, page: Page, url: string): Promise<void> {
  const path = new URL(url).pathname;
  await page.goto(url);
  await page.keyboard.press('Tab');
  t.equal(
    await page.evaluate('document.activeElement && document.activeElement.textContent'),
    'Skip to content',
    `${path}: the first Tab reaches the skip link`,
  );
  await page.keyboard.press('Enter');
  t.equal(await page.evaluate('document.activeElement && document.activeElement.id'), 'main', `${path}: which moves focus to the content`);
  // Read in the browser (no DOM types in this project's TypeScript: a string).
  const unlabelled = await page.evaluate(`[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
    .filter((el) => !el.getAttribute('aria-label') && !(el.tagName === 'BUTTON' && el.textContent.trim()) && !(el.labels && el.labels.length > 0))
    .map((el) => el.outerHTML.slice(0, 80))`);
  t.same(unlabelled, [], `${path}: every control has a label`);
  const headless = await page.evaluate(
    "[...document.querySelectorAll('table')].filter((tb) => !tb.querySelector('caption') || !tb.querySelector('th[scope]')).length",
  );
  t.equal(headless, 0, `${path}: every table has a caption and scoped headers`);
}
