/**
 * The segments page against the real notifier (browser, and the browser's own HTTP client for
 * the large upload): a list uploaded from a file creates the segment; a file with a bad line is
 * refused beside the file input naming the line, and the live version stays; a good one is the
 * next version (versions listed); a 3 MB list (past the console's 1 MB form limit) streams
 * through whole; a rule segment is refused beside the field the notifier names, then created and
 * counted over the profiles; a delete asks for a confirmation.
 */
import type { Test } from 'tap';
import { SERVICE_SECRET } from '../../notifier/core/helpers.js';
import { type Platform, OPERATOR } from '../platform.js';
import { useBrowser } from '../browser.js';
import { signInAsOperator } from '../signin.js';
import { checkAccessible } from '../ops-a11y.js';

const SERVICE = { 'x-subject': `key:${'a'.repeat(64)}`, 'x-subject-role': 'service', 'x-subject-secret': SERVICE_SECRET };

/** The page's subtests, on a platform the caller started (test/console/shared-platform.test.ts). */
export async function segmentsPage(t: Test, platform: Platform): Promise<void> {
  const browser = await useBrowser(t);
  const segmentRow = async (id: string) =>
    (await platform.db.pool.query<{ version: number; size: string }>('SELECT version, size FROM segments WHERE id = $1', [id])).rows[0];
  for (const [user, locale] of [
    ['amelie', 'fr'],
    ['bruno', 'fr'],
    ['chris', 'en'],
  ] as const) {
    const r = await fetch(`${platform.notifierUrl}/api/v1/users/${user}/profile`, {
      method: 'PUT',
      headers: { ...SERVICE, 'content-type': 'application/json' },
      body: JSON.stringify({ locale, email: `${user}@example.com` }),
    });
    t.equal(r.status, 201, `profile of ${user} created`);
  }

  await t.test('upload a list, a refused file, a new version', async (t) => {
    const page = await browser.page(t);
    await signInAsOperator(page, platform.consoleUrl, OPERATOR, '/segments');
    t.equal(await page.locator('main').getAttribute('data-page'), 'segments');

    await page.getByLabel('Segment id').first().fill('spring');
    await page.getByLabel('File format').selectOption('ndjson');
    await page.getByLabel('Member file').setInputFiles({
      name: 'ids.ndjson',
      mimeType: 'application/x-ndjson',
      buffer: Buffer.from('"amelie"\n{"user_id": "bruno"}\n"amelie"\n"zoe"\n'),
    });
    await page.getByRole('button', { name: 'Upload members' }).click();
    t.equal(new URL(page.url()).pathname, '/segments/spring');
    t.match(await page.locator('.flash.success').innerText(), /Created spring version 1: 3 members from ids\.ndjson/);
    t.equal(await page.locator('#segment-size').innerText(), '3');
    t.match(await page.locator('#segment-versions tbody').innerText(), /1\s+live\s+3/);

    // A bad line: refused beside the file, naming the line; nothing changes.
    await page.getByLabel('File format').selectOption('csv');
    await page
      .getByLabel('Member file')
      .setInputFiles({ name: 'bad.csv', mimeType: 'text/csv', buffer: Buffer.from('user_id\nalice\nbob,extra\n') });
    await page.getByRole('button', { name: 'Upload members' }).click();
    t.equal(await page.getByLabel('Member file').getAttribute('aria-invalid'), 'true');
    t.match(await page.locator('#f-file-error').innerText(), /line 3: has more than one column/);
    t.same(await segmentRow('spring'), { version: 1, size: '3' }, 'the live version is unchanged');

    await page.getByLabel('File format').selectOption('csv');
    await page
      .getByLabel('Member file')
      .setInputFiles({ name: 'good.csv', mimeType: 'text/csv', buffer: Buffer.from('user_id\r\nalice\r\n"bob"\r\n') });
    await page.getByRole('button', { name: 'Upload members' }).click();
    t.match(await page.locator('.flash.success').innerText(), /Uploaded spring version 3: 2 members from good\.csv/);
    const versions = await page.locator('#segment-versions tbody tr').allInnerTexts();
    t.match(versions[0], /^3\s+live\s+2/);
    t.match(versions[1], /^2\s+abandoned( \(members deleted\))?\s+0/, 'the refused upload is listed as abandoned');
    t.match(versions[2], /^1\s+retired( \(members deleted\))?\s+3/, 'retired (its members deleted once the clean-up has run)');
  });

  await t.test('a 3 MB list streams through the console (its form limit is 1 MB)', async (t) => {
    const page = await browser.page(t);
    await page.goto(`${platform.consoleUrl}/segments`);
    const csrf = await page.locator('form[enctype="multipart/form-data"] input[name="_csrf"]').first().getAttribute('value');
    const ids = Array.from({ length: 200_000 }, (_, i) => `"member-${String(i).padStart(7, '0')}"`).join('\n');
    t.ok(ids.length > 3_000_000);
    const res = await browser.context.request.post(`${platform.consoleUrl}/segments/upload`, {
      headers: { origin: platform.consoleUrl },
      multipart: {
        _csrf: csrf!,
        segment_id: 'big',
        format: 'ndjson',
        file: { name: 'big.ndjson', mimeType: 'application/x-ndjson', buffer: Buffer.from(ids) },
      },
      maxRedirects: 0,
      timeout: 120_000,
    });
    t.equal(res.status(), 303);
    t.equal(res.headers()['location'], '/segments/big');
    t.same(await segmentRow('big'), { version: 1, size: '200000' });

    // A large file with a bad line near its start: refused naming the line, without waiting for the rest.
    const bad = await browser.context.request.post(`${platform.consoleUrl}/segments/upload`, {
      headers: { origin: platform.consoleUrl },
      multipart: {
        _csrf: csrf!,
        segment_id: 'big',
        format: 'ndjson',
        file: { name: 'bad.ndjson', mimeType: 'application/x-ndjson', buffer: Buffer.from(`"ok"\nnot json\n${ids}`) },
      },
      maxRedirects: 0,
      timeout: 120_000,
    });
    t.equal(bad.status(), 422);
    t.match(await bad.text(), /line 2: is not JSON/);
    t.same(await segmentRow('big'), { version: 1, size: '200000' }, 'the live version is unchanged');

    const forged = await browser.context.request.post(`${platform.consoleUrl}/segments/upload`, {
      headers: { origin: platform.consoleUrl },
      multipart: {
        segment_id: 'forged',
        format: 'ndjson',
        file: { name: 'f.ndjson', mimeType: 'application/x-ndjson', buffer: Buffer.from('"x"\n') },
      },
      maxRedirects: 0,
    });
    t.equal(forged.status(), 403, 'no CSRF token: refused');
    t.equal(await segmentRow('forged'), undefined, 'and nothing stored');
  });

  await t.test('a rule segment: refused beside the field, then counted; delete after confirming', async (t) => {
    const page = await browser.page(t);
    await page.goto(`${platform.consoleUrl}/segments`);
    const rule = page.getByRole('form', { name: 'Rule segment' });
    await rule.getByLabel('Segment id').fill('french');
    await rule.getByLabel('Time zone').fill('Mars/Olympus');
    await rule.getByRole('button', { name: 'Save rule segment' }).click();
    t.equal(await page.getByLabel('Time zone').getAttribute('aria-invalid'), 'true');
    t.match(await page.locator('#f-timezone-error').innerText(), /IANA time zone/);

    await page.getByLabel('Time zone').fill('');
    await page.getByLabel('Locale').fill('fr');
    await page.getByRole('button', { name: 'Save rule segment' }).click();
    t.equal(new URL(page.url()).pathname, '/segments/french');
    t.match(await page.locator('.flash.success').innerText(), /Created rule segment french \(version 1, 2 profiles match now\)/);
    t.equal(await page.locator('#segment-size').innerText(), '2');

    await page.goto(`${platform.consoleUrl}/segments`);
    t.match(await page.locator('#segments').innerText(), /french\s+rule\s+1\s+live rule/);

    await page.goto(`${platform.consoleUrl}/segments/french`);
    await page.getByRole('button', { name: 'Delete segment' }).click();
    t.match(await page.locator('.field-error').innerText(), /Tick the box/);
    t.ok(await segmentRow('french'), 'not deleted without the confirmation');
    await page.getByLabel(/Yes, delete french/).check();
    await page.getByRole('button', { name: 'Delete segment' }).click();
    t.match(await page.locator('.flash.success').innerText(), /Deleted segment french/);
    t.equal(await segmentRow('french'), undefined);
  });

  await t.test('keyboard and labels on every page of it', async (t) => {
    const page = await browser.page(t);
    for (const path of ['/segments', '/segments/spring']) await checkAccessible(t, page, `${platform.consoleUrl}${path}`);
  });
}
