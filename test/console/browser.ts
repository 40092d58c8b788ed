/**
 * Debian's Chromium driven by playwright-core for the console's browser tests: headless, with a
 * fresh profile directory per browser, and the flags CI needs (root without a sandbox, no GPU, no
 * network of its own: no QUIC, no first-run, no background fetches, no component updates, no
 * sync). Never downloads a browser: CHROMIUM_PATH or /usr/bin/chromium, and a clear failure when
 * neither exists (.ci/run installs it).
 *
 * One browser per test file, reused by its subtests; each subtest that fails leaves a full-page
 * screenshot and the page's HTML in test/.artifacts/console/ (gitignored) for the CI log to point at.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { PROJECT_ROOT } from '../../shared/paths.js';
import type { TestContext } from '../harness/db.js';
import { CHROMIUM_FLAGS } from './chromium-flags.js';

export const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
export const ARTIFACTS = join(PROJECT_ROOT, 'test', '.artifacts', 'console');

export interface Browser {
  context: BrowserContext;
  /** A new tab; when `t` fails, its screenshot and HTML are saved before it closes. */
  page(t: TestContext & { name: string; fullname?: string }): Promise<Page>;
}

/** Launches Chromium for this file; closed (and its profile removed) at `t`'s teardown. */
export async function useBrowser(t: TestContext): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)`);
  const profile = mkdtempSync(join(tmpdir(), 'console-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_FLAGS],
    viewport: { width: 1366, height: 860 },
  });
  t.teardown(async () => {
    await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  });
  return {
    context,
    async page(st) {
      const page = await context.newPage();
      st.teardown(async () => {
        if (!st.passing()) {
          mkdirSync(ARTIFACTS, { recursive: true });
          const base = join(ARTIFACTS, (st.fullname ?? st.name).replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 150));
          try {
            await page.screenshot({ path: `${base}.png`, fullPage: true });
            writeFileSync(`${base}.html`, await page.content());
            process.stderr.write(`# screenshot of the failed page: ${base}.png\n`);
          } catch (err) {
            process.stderr.write(`# could not save the failed page: ${err instanceof Error ? err.message : String(err)}\n`);
          }
        }
        // CONSOLE_SHOTS_DIR=<dir>: every page as it was at the end of its subtest, to look at.
        const shots = process.env['CONSOLE_SHOTS_DIR'];
        if (shots && st.passing()) {
          mkdirSync(shots, { recursive: true });
          await page
            .screenshot({ path: join(shots, `${st.name.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 80)}.png`), fullPage: true })
            .catch(() => {});
        }
        await page.close().catch(() => {});
      });
      return page;
    },
  };
}
