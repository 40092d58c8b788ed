/**
 * Where a test module's source is. `npm test` runs the JavaScript `tsc -b` wrote to dist/
 * (bin/test-files.mjs), so a test's `import.meta.url` is `dist/test/…/x.test.js`; what lives
 * beside the source (fixtures that are not TypeScript, the docs, the README, dist/ itself) is
 * found from the source's place: `new URL('./fixtures/', sourceUrl(import.meta.url))`. Run from
 * its source (`node --import=./bin/test-loader.mjs`), a module's URL is already its source's.
 */
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = fileURLToPath(import.meta.url);
const compiled = here.endsWith('.js');

/** The repository's root: this file is test/harness/source.ts, or dist/test/harness/source.js. */
export const ROOT = join(dirname(here), compiled ? '../../..' : '../..');

/** The source file's URL of a module's `import.meta.url`, compiled (dist/…/x.js) or not. */
export function sourceUrl(metaUrl: string): string {
  const path = fileURLToPath(metaUrl);
  const rel = relative(join(ROOT, 'dist'), path);
  if (rel.startsWith('..') || rel.startsWith(sep)) return metaUrl;
  return pathToFileURL(join(ROOT, rel.replace(/\.js$/, '.ts'))).href;
}

/** The folder of a module's source (`import.meta.dirname` of the source). */
export function sourceDir(metaUrl: string): string {
  return dirname(fileURLToPath(sourceUrl(metaUrl)));
}
