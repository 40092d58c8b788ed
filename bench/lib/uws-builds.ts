/**
 * The uWS builds we measure, installed side by side under bench/.scratch/uws-builds/<alias>/ with
 * the ordinary npm client (`npm install --prefix`), and what can be read off each installed copy:
 * publisher, upstream commit, licence, the Node ABIs it ships, the glibc floor of its binary.
 * A process runs one of them instead of the pinned `uWebSockets.js` with
 * `node --require bench/lib/uws-redirect.cjs` and `UWS_BUILD_DIR` set to {@link InstalledBuild.dir}.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../shared/paths.js';

/** The builds, by alias: package and exact version. */
export const UWS_BUILDS = {
  trufflesuite: { pkg: '@trufflesuite/uws-js-unofficial', version: '20.30.0-unofficial.0' },
  rjweb: { pkg: '@rjweb/uws', version: '1.5.0' },
  uwebsockets: { pkg: 'uwebsockets', version: '3.0.6' },
} as const;
export type UwsAlias = keyof typeof UWS_BUILDS;

/** The preload that swaps the build (see its header). */
export const UWS_REDIRECT = join(PROJECT_ROOT, 'bench', 'lib', 'uws-redirect.cjs');

export interface InstalledBuild {
  alias: UwsAlias;
  /** `name@version`. */
  id: string;
  /** The package directory: what UWS_BUILD_DIR names. */
  dir: string;
  /** Everything the install brought, bytes (the build and its dependencies). */
  bytes: number;
}

const scratch = (alias: string): string => join(PROJECT_ROOT, 'bench', '.scratch', 'uws-builds', alias);

/** Installs `alias` under bench/.scratch/uws-builds/ unless that exact version is already there. */
export function installUwsBuild(alias: UwsAlias, log: (msg: string) => void = () => {}): InstalledBuild {
  const { pkg, version } = UWS_BUILDS[alias];
  const prefix = scratch(alias);
  const dir = join(prefix, 'node_modules', ...pkg.split('/'));
  const have = existsSync(join(dir, 'package.json'))
    ? (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: string }).version
    : undefined;
  if (have !== version) {
    mkdirSync(prefix, { recursive: true });
    log(`npm install --prefix ${prefix} ${pkg}@${version}`);
    const r = spawnSync('npm', ['install', '--prefix', prefix, '--no-audit', '--no-fund', '--ignore-scripts', `${pkg}@${version}`], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    if (r.status !== 0) throw new Error(`npm install ${pkg}@${version} failed (exit ${r.status}): ${r.stderr.slice(-500)}`);
  }
  return { alias, id: `${pkg}@${version}`, dir, bytes: duBytes(join(prefix, 'node_modules')) };
}

function duBytes(path: string): number {
  let total = 0;
  for (const e of readdirSync(path, { withFileTypes: true })) {
    const p = join(path, e.name);
    if (e.isDirectory()) total += duBytes(p);
    else if (e.isFile()) total += statSync(p).size;
  }
  return total;
}

/** Every `.node` file under `dir` (not its dependencies), relative paths. */
function binaries(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
    if (e.name === 'node_modules') continue;
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...binaries(dir, r));
    else if (e.name.endsWith('.node')) out.push(r);
  }
  return out;
}

export interface BuildFacts {
  repository: string;
  author: string;
  license: string;
  /** The upstream commit the package says it was built from (its source_commit file), if any. */
  sourceCommit: string | undefined;
  /** Node ABIs with a linux x64 binary. */
  abis: number[];
  /** The highest GLIBC_ symbol version the linux x64 binary for this Node needs (objdump -T). */
  glibcFloor: string;
}

/** What the installed copy says about itself. */
export function buildFacts(b: InstalledBuild): BuildFacts {
  const pj = JSON.parse(readFileSync(join(b.dir, 'package.json'), 'utf8')) as {
    repository?: string | { url?: string };
    author?: string | { name?: string };
    license?: string;
  };
  const repository = (typeof pj.repository === 'string' ? pj.repository : (pj.repository?.url ?? ''))
    .replace(/^git\+/, '')
    .replace(/\.git$/, '');
  const author = typeof pj.author === 'string' ? pj.author : (pj.author?.name ?? '');
  const licenseFile = existsSync(join(b.dir, 'LICENSE')) ? readFileSync(join(b.dir, 'LICENSE'), 'utf8') : '';
  const fileLicense = /Apache License\s+Version 2\.0/.test(licenseFile) ? 'Apache-2.0 (LICENSE)' : licenseFile.split('\n')[0]?.trim();
  const license = [pj.license ? `${pj.license} (package.json)` : undefined, fileLicense].filter(Boolean).join(', ');
  const sc = join(b.dir, 'source_commit');
  const sourceCommit = existsSync(sc) ? readFileSync(sc, 'utf8').trim() : undefined;
  const bins = binaries(b.dir);
  const abis = bins
    .map((f) => /uws_linux_x64_(\d+)\.node$/.exec(f)?.[1])
    .filter((x): x is string => x !== undefined)
    .map(Number)
    .filter((x, i, all) => all.indexOf(x) === i)
    .sort((x, y) => x - y);
  const mine = bins.find((f) => f.endsWith(`uws_linux_x64_${process.versions.modules}.node`));
  let glibcFloor = 'no binary for this Node';
  if (mine) {
    const r = spawnSync('objdump', ['-T', join(b.dir, mine)], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    const versions = [...(r.stdout ?? '').matchAll(/GLIBC_(\d+)\.(\d+)(?:\.(\d+))?/g)].map((m) => [
      Number(m[1]),
      Number(m[2]),
      Number(m[3] ?? 0),
    ]);
    versions.sort((x, y) => x[0]! - y[0]! || x[1]! - y[1]! || x[2]! - y[2]!);
    const top = versions.at(-1);
    glibcFloor = r.status !== 0 ? 'objdump not available' : top ? `${top[0]}.${top[1]}${top[2] ? `.${top[2]}` : ''}` : 'none';
  }
  return { repository, author, license, sourceCommit, abis, glibcFloor };
}
