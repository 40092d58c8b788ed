/**
 * Which uWS build: installs each candidate build of uWebSockets.js from the npm registry into
 * bench/.scratch/uws-builds/ (bench/lib/uws-builds.ts), runs the conformance cases
 * (test/limiter/fixtures/uws-conformance.ts) against a plain app of each, in a child process that
 * loads that build through bench/lib/uws-redirect.cjs, and prints the table limiter/README.md
 * "Which uWS build" holds: what each package is, and each case's outcome. Differences from the
 * measured table (EXPECTED in the fixture) are listed after it.
 *
 *   npx tsc -b && node dist/bench/uws-builds.js [--builds trufflesuite,rjweb,uwebsockets] [--json FILE]
 *
 * The speed of each build inside the sidecar is bench/sidecar.ts `--uws-peer`.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { PROJECT_ROOT } from '../shared/paths.js';
import { CASES, EXPECTED } from '../test/limiter/fixtures/uws-conformance.js';
import {
  buildFacts,
  installUwsBuild,
  UWS_BUILDS,
  UWS_REDIRECT,
  type BuildFacts,
  type InstalledBuild,
  type UwsAlias,
} from './lib/uws-builds.js';

const { values: argv } = parseArgs({
  options: {
    builds: { type: 'string', default: Object.keys(UWS_BUILDS).join(',') },
    json: { type: 'string' },
  },
  strict: true,
});
const aliases = argv.builds.split(',').map((s) => s.trim()) as UwsAlias[];
for (const a of aliases) if (!(a in UWS_BUILDS)) throw new Error(`unknown build "${a}" (known: ${Object.keys(UWS_BUILDS).join(', ')})`);

const CHILD = join(PROJECT_ROOT, 'dist', 'bench', 'lib', 'uws-conformance-child.js');
const note = (msg: string): void => void process.stderr.write(`${msg}\n`);

interface Measured {
  build: InstalledBuild;
  facts: BuildFacts;
  /** Undefined when the build did not load (then `error` says why). */
  run?: { build: string; nativeBuild: boolean; exports: string[]; requestApi: string[]; results: Record<string, string> };
  error?: string;
}

function measure(alias: UwsAlias): Measured {
  const build = installUwsBuild(alias, note);
  const facts = buildFacts(build);
  note(`${build.id}: running ${CASES.length} cases`);
  const r = spawnSync(process.execPath, ['--require', UWS_REDIRECT, CHILD], {
    env: { ...process.env, UWS_BUILD_DIR: build.dir },
    encoding: 'utf8',
    timeout: 120_000,
  });
  const line = (r.stdout ?? '').trim().split('\n').at(-1) ?? '';
  try {
    return { build, facts, run: JSON.parse(line) as Measured['run'] };
  } catch {
    return { build, facts, error: `exit ${r.status ?? r.signal}: ${(r.stderr ?? '').trim().split('\n').slice(0, 3).join(' ')}` };
  }
}

const mb = (n: number): string => `${Math.round(n / 1e6)} MB`;
const cell = (s: string): string => s.replace(/\|/g, '\\|');

function api(m: Measured): string {
  if (!m.run) return '—';
  const has = (n: string): boolean => m.run!.exports.includes(n);
  const close = has('us_listen_socket_close') ? '`us_listen_socket_close`' : has('closeSocket') ? '`closeSocket`' : '?';
  const port = has('us_socket_local_port') ? '`us_socket_local_port`' : has('getSocketPort') ? '`getSocketPort`' : '?';
  const each = m.run.requestApi.includes('forEach')
    ? '`req.forEach`'
    : m.run.requestApi.includes('forEachHeader')
      ? '`req.forEachHeader`'
      : '?';
  return `${close}, ${port}, ${each}`;
}

const measured = aliases.map(measure);
const head = `| | ${measured.map((m) => `\`${m.build.id}\``).join(' | ')} |`;
const lines = [head, `|---|${measured.map(() => '---').join('|')}|`];
const row = (what: string, f: (m: Measured) => string): void =>
  void lines.push(`| ${what} | ${measured.map((m) => cell(f(m))).join(' | ')} |`);
row('repository (publisher)', (m) => `${m.facts.repository}${m.facts.author ? ` (${m.facts.author})` : ''}`);
row('upstream commit (`source_commit`)', (m) => (m.facts.sourceCommit ? `\`${m.facts.sourceCommit.slice(0, 12)}\`` : 'none shipped'));
row('licence', (m) => m.facts.license);
row('Node ABIs (linux x64)', (m) => m.facts.abis.join(', '));
row(`glibc floor (binary for ABI ${process.versions.modules})`, (m) => m.facts.glibcFloor);
row('installed size', (m) => mb(m.build.bytes));
row(`loads natively on Node ${process.versions.node}`, (m) =>
  m.run ? (m.run.nativeBuild ? 'yes' : 'NO: the pure-Node fallback loaded') : `no (${m.error})`,
);
row('close listen socket, its port, iterate headers', api);
for (const c of CASES) row(`${c.id}: ${c.what}`, (m) => m.run?.results[c.id] ?? '—');
console.log(lines.join('\n'));

const diffs: string[] = [];
for (const m of measured) {
  const expected = EXPECTED[m.build.id];
  if (!m.run) continue;
  if (!expected) {
    diffs.push(`${m.build.id}: not in EXPECTED (test/limiter/fixtures/uws-conformance.ts): add its column`);
    continue;
  }
  for (const c of CASES)
    if (expected[c.id] !== m.run.results[c.id])
      diffs.push(`${m.build.id} ${c.id}: expected "${expected[c.id]}", got "${m.run.results[c.id]}"`);
}
console.log(
  diffs.length === 0 ? '\nEvery outcome matches EXPECTED.' : `\nDifferences from EXPECTED:\n${diffs.map((d) => `- ${d}`).join('\n')}`,
);
if (argv.json) {
  writeFileSync(argv.json, JSON.stringify(Object.fromEntries(measured.map((m) => [m.build.id, m.run?.results ?? {}])), null, 2) + '\n');
  note(`outcomes written to ${argv.json}`);
}
