/**
 * The console's static assets (assets/console.css, assets/console.js), read once at start and
 * served under a name with their content hash (`/assets/console.3f9a1c2b7d4e.css`), so a page
 * always names the exact bytes it was written for and browsers may keep them for a year
 * (`Cache-Control: public, max-age=31536000, immutable`); a new version is a new name. They are
 * read from the source tree (like the migrations), so dist/ needs no copy step.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../shared/paths.js';

export interface Asset {
  /** The URL path, with the hash. */
  readonly path: string;
  readonly body: Buffer;
  readonly contentType: string;
  readonly etag: string;
}

export interface Assets {
  readonly css: Asset;
  readonly js: Asset;
  /** The asset at this URL path, if any. */
  byPath(path: string): Asset | undefined;
}

export const ASSET_CACHE_CONTROL = 'public, max-age=31536000, immutable';

function load(file: string, contentType: string): Asset {
  const body = readFileSync(join(PROJECT_ROOT, 'console', 'assets', file));
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
  const dot = file.lastIndexOf('.');
  return { path: `/assets/${file.slice(0, dot)}.${hash}${file.slice(dot)}`, body, contentType, etag: `"${hash}"` };
}

export function loadAssets(): Assets {
  const css = load('console.css', 'text/css; charset=utf-8');
  const js = load('console.js', 'text/javascript; charset=utf-8');
  const all = new Map([css, js].map((a) => [a.path, a]));
  return { css, js, byPath: (p) => all.get(p) };
}
