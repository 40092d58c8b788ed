#!/usr/bin/env node
/**
 * `npm run quota|keys|admin -- …`: runs the built CLI (dist/bin/<name>.js), compiling first only
 * when a source is newer than the last build.
 *
 * Why: the scripts used to run `tsc -b` every time, which costs about 1.5 s even when nothing
 * changed (it reads the whole program to find that out). Comparing modification times costs a few
 * milliseconds: the newest `.ts` under the folders tsconfig.json includes (and tsconfig.json,
 * package.json) against `dist/.tsbuildinfo`, which every build that emits rewrites. A stale build
 * runs `tsc -b` exactly as before; a deleted source is not noticed (the old output is harmless).
 * The CLI then runs in this process (one Node start, not two), with argv as if started directly.
 *
 *   node bin/run-built.mjs <quota|keys|admin> [args…]
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, utimesSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(fileURLToPath(import.meta.url), '../..');
const CLIS = new Set(['quota', 'keys', 'admin']);

/** The newest modification time (ms) of a `.ts` file under `dir`, 0 when none. */
function newestTs(dir) {
  let newest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestTs(p));
    else if (e.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

/** Whether dist/ is at least as new as every source the build reads. */
function buildIsFresh(projectRoot = root) {
  let built;
  try {
    built = statSync(join(projectRoot, 'dist/.tsbuildinfo')).mtimeMs;
  } catch {
    return false;
  }
  const tsconfig = JSON.parse(readFileSync(join(projectRoot, 'tsconfig.json'), 'utf8'));
  // "shared/**/*.ts" → shared; the folders are walked whole, which is what the globs mean here.
  const dirs = new Set((tsconfig.include ?? []).map((g) => g.split('/*')[0]));
  let newest = Math.max(statSync(join(projectRoot, 'tsconfig.json')).mtimeMs, statSync(join(projectRoot, 'package.json')).mtimeMs);
  for (const d of dirs) newest = Math.max(newest, newestTs(join(projectRoot, d)));
  return newest <= built;
}

const name = process.argv[2];
if (!CLIS.has(name)) {
  process.stderr.write(`run-built: name one of ${[...CLIS].join(', ')}\n`);
  process.exit(2);
}
if (!buildIsFresh()) {
  const tsc = spawnSync(join(root, 'node_modules/.bin/tsc'), ['-b'], { cwd: root, stdio: 'inherit' });
  if (tsc.status !== 0) process.exit(tsc.status ?? 1);
  // A build that found nothing to emit leaves the build info's time alone: mark it fresh now.
  const now = new Date();
  utimesSync(join(root, 'dist/.tsbuildinfo'), now, now);
}
process.argv.splice(2, 1);
await import(pathToFileURL(join(root, 'dist/bin', `${name}.js`)).href);
