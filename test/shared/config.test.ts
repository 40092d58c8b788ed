// @tier: pure
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { ConfigError, loadConfig, nonEmpty, pick, type VarSpec } from '../../shared/config.js';
import { ENV } from '../../bin/env-catalogue.js';
import { sourceUrl } from '../harness/source.js';

const FIXTURES = new URL('../fixtures/config/', sourceUrl(import.meta.url));
const README = new URL('../../README.md', sourceUrl(import.meta.url));

/** Reads a fixture: `NAME=value` lines (value verbatim), `#` comments and blank lines ignored. */
function envFile(name: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of readFileSync(new URL(name, FIXTURES), 'utf8').split('\n')) {
    if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq < 0) throw new Error(`fixture ${name}: not NAME=value: ${line}`);
    env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return env;
}

// The real catalogue entries (so the messages are the ones operators see), plus one required
// variable: the catalogue itself has none yet.
const CATALOG = pick(ENV, [
  'LOG_LEVEL',
  'HOST',
  'DATABASE_URL',
  'DATABASE_POOL_MAX',
  'REDIS_URL',
  'LIMITER_PORT',
  'NOTIFIER_PORT',
  'SHUTDOWN_GRACE',
  'START_SERVICES',
  'MAX_BODY_BYTES',
]);
const REQUIRED = {
  NEEDED: { default: undefined, services: ['test'], description: 'a required variable', parse: nonEmpty } satisfies VarSpec<string>,
};

/** One fixture per failure mode, and the exact line the operator sees. */
const FAILURES: Record<string, string> = {
  'missing-required.env': 'config: NEEDED is required but not set',
  'empty-required.env': 'config: NEEDED is required but not set',
  'non-integer.env': 'config: DATABASE_POOL_MAX must be an integer, got "ten"',
  'fractional-integer.env': 'config: DATABASE_POOL_MAX must be an integer, got "2.5"',
  'integer-out-of-range.env': 'config: DATABASE_POOL_MAX must be an integer between 1 and 1000, got "0"',
  'port-out-of-range.env': 'config: LIMITER_PORT must be a port number between 0 and 65535, got "70000"',
  'port-negative.env': 'config: NOTIFIER_PORT must be a port number between 0 and 65535, got "-1"',
  'bad-url-scheme.env': 'config: DATABASE_URL must be a URL with scheme postgres or postgresql',
  'unparseable-url.env': 'config: REDIS_URL must be a URL (redis, rediss)',
  'bad-enum.env': 'config: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "verbose"',
  'bad-duration.env': 'config: SHUTDOWN_GRACE must be a duration such as 500ms, 5s, 2m, 1h or 14d, got "10 seconds"',
  'bad-list-item.env':
    'config: START_SERVICES item 2: must be one of control-plane, limiter, notifier, identity, sandbox, console, got "limiter, billing ,notifier"',
  'bad-size.env': 'config: MAX_BODY_BYTES must be a size such as 16kb or 1mb, got "1 megabyte"',
};

t.test('each failure fixture stops with its exact one-line message', async (t) => {
  for (const [fixture, expected] of Object.entries(FAILURES)) {
    const spec = fixture.includes('required') ? { ...REQUIRED, ...CATALOG } : CATALOG;
    let caught: unknown;
    try {
      loadConfig(spec, envFile(fixture));
    } catch (err) {
      caught = err;
    }
    t.ok(caught instanceof ConfigError, `${fixture}: throws a ConfigError`);
    if (!(caught instanceof ConfigError)) continue;
    t.equal(caught.message, expected, fixture);
    t.notMatch(caught.message, /[\r\n]/, `${fixture}: one line`);
    t.equal(caught.variable, /^config: (\S+)/.exec(expected)?.[1], `${fixture}: names the variable`);
  }
});

t.test('every fixture in test/fixtures/config is exercised', async (t) => {
  const files = readdirSync(FIXTURES).filter((f) => f.endsWith('.env'));
  t.same(files.sort(), [...Object.keys(FAILURES), 'valid.env'].sort());
});

t.test('secret values are never echoed back', async (t) => {
  for (const fixture of ['bad-url-scheme.env', 'unparseable-url.env']) {
    t.throws(() => loadConfig(CATALOG, envFile(fixture)), ConfigError);
    try {
      loadConfig(CATALOG, envFile(fixture));
    } catch (err) {
      t.notMatch(String(err), /hunter2/, fixture);
    }
  }
  // Every secret in the catalogue, whatever its parser says about a bad value.
  const secrets = Object.entries(ENV).filter(([, spec]) => 'secret' in spec && spec.secret);
  t.ok(secrets.length >= 3, 'the catalogue marks its secrets');
  for (const [name, spec] of secrets) {
    for (const bad of ['ftp://user:hunter2@host', 'hunter2 is not valid', ' ']) {
      try {
        loadConfig({ [name]: spec }, { [name]: bad });
      } catch (err) {
        t.notMatch(String(err), /hunter2|got/, `${name}=${JSON.stringify(bad)}: value not shown`);
      }
    }
  }
});

t.test('a valid environment parses, applies defaults, and is frozen', async (t) => {
  const cfg = loadConfig({ ...REQUIRED, ...CATALOG }, envFile('valid.env'));
  t.same(
    { ...cfg },
    {
      NEEDED: 'yes',
      LOG_LEVEL: 'debug',
      HOST: '127.0.0.1',
      DATABASE_URL: 'postgres://app:hunter2@db.internal:5432/app',
      DATABASE_POOL_MAX: 25,
      REDIS_URL: undefined,
      LIMITER_PORT: 0,
      NOTIFIER_PORT: 8082,
      SHUTDOWN_GRACE: 1500,
      START_SERVICES: ['limiter', 'notifier'],
      MAX_BODY_BYTES: 16 * 1024,
    },
  );
  t.ok(Object.isFrozen(cfg));
  t.throws(() => {
    (cfg as { LOG_LEVEL: string }).LOG_LEVEL = 'trace';
  }, TypeError);
  t.equal(cfg.LOG_LEVEL, 'debug');
});

t.test('the catalogue: every default parses, every entry is documented', async (t) => {
  const cfg = loadConfig(ENV, {});
  t.ok(Object.isFrozen(cfg));
  for (const [name, spec] of Object.entries(ENV) as [string, VarSpec<unknown>][]) {
    t.match(name, /^[A-Z][A-Z0-9_]*$/, `${name} is UPPER_SNAKE`);
    t.ok(spec.description.trim().length > 0, `${name} has a description`);
    t.ok(spec.services.length > 0, `${name} names the processes that read it`);
  }
});

// ── README ↔ catalogue ─────────────────────────────────────────────────────

/**
 * The README's configuration table: every markdown table row under the heading `## Configuration`
 * (up to the next `## ` heading) whose first cell is a variable name in backticks. Header and
 * separator rows are skipped; several tables (e.g. one per service) are fine.
 */
function readmeVariables(markdown: string): { name: string; cells: string[]; header: string[] }[] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => l.trim() === '## Configuration');
  if (start < 0) return [];
  const isSeparator = (l: string | undefined) => l !== undefined && /^\|[\s:|-]+\|$/.test(l.trim());
  const cellsOf = (l: string) =>
    l
      .trim()
      .replace(/^\||\|$/g, '')
      .split('|')
      .map((c) => c.trim());
  const out: { name: string; cells: string[]; header: string[] }[] = [];
  let header: string[] = [];
  for (let i = start + 1; i < lines.length && !/^##\s/.test(lines[i]!); i++) {
    const line = lines[i]!;
    if (!line.trim().startsWith('|') || isSeparator(line)) continue;
    if (isSeparator(lines[i + 1])) {
      header = cellsOf(line).map((c) => c.toLowerCase());
      continue;
    }
    const cells = cellsOf(line);
    const name = /^`([A-Z][A-Z0-9_]*)`$/.exec(cells[0] ?? '')?.[1];
    if (name) out.push({ name, cells, header });
  }
  return out;
}

/** A default cell: `value` in backticks, or empty / — / - / (unset) / none / required for no default. */
function defaultCell(cell: string | undefined): string | undefined {
  const c = (cell ?? '').trim();
  if (['', '—', '–', '-', '(unset)', 'unset', 'none', '(none)', 'required'].includes(c.toLowerCase())) return undefined;
  return /^`([^`]*)`$/.exec(c)?.[1] ?? c;
}

t.test('the README table parser reads the documented format', async (t) => {
  const sample = [
    '# Title',
    '| `NOT_HERE` | x |',
    '## Configuration',
    '',
    'Every variable, its default and meaning.',
    '',
    '| Variable | Default | Services | Meaning |',
    '|---|---|---|---|',
    '| `LOG_LEVEL` | `info` | all | pino level |',
    '| `DATABASE_URL` | — | notifier | PostgreSQL URL |',
    '',
    '### Limiter',
    '| Variable | Default | Meaning |',
    '| :-- | :-: | --- |',
    '| `LIMITER_PORT` | `8080` | data plane |',
    '| not a variable | | |',
    '## Next section',
    '| `ALSO_NOT_HERE` | x |',
  ].join('\n');
  const rows = readmeVariables(sample);
  t.same(
    rows.map((r) => [r.name, defaultCell(r.cells[r.header.indexOf('default')])]),
    [
      ['LOG_LEVEL', 'info'],
      ['DATABASE_URL', undefined],
      ['LIMITER_PORT', '8080'],
    ],
  );
});

t.test('README.md documents every variable in the catalogue, and only those', async (t) => {
  t.ok(existsSync(README), 'README.md exists');
  if (!existsSync(README)) return;
  const rows = readmeVariables(readFileSync(README, 'utf8'));
  t.ok(rows.length > 0, 'README.md has a table of `VARIABLES` under "## Configuration"');
  const documented = new Map(rows.map((r) => [r.name, r]));
  t.equal(documented.size, rows.length, 'no variable is listed twice');
  for (const [name, spec] of Object.entries(ENV) as [string, VarSpec<unknown>][]) {
    const row = documented.get(name);
    t.ok(row, `${name} (the catalogue) is in the README's configuration table`);
    const col = row?.header.indexOf('default') ?? -1;
    if (row && col > 0) t.equal(defaultCell(row.cells[col]), spec.default, `${name}: the README's default matches its declaration`);
  }
  for (const name of documented.keys()) t.ok(name in ENV, `${name} (README) is declared in the catalogue`);
});
