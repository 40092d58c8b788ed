// @tier: pure
/**
 * The catalogue's "read by" labels (each env.ts `services`, gathered by bin/env-catalogue.ts) are true: each variable names exactly
 * the processes whose pick lists read it. A variable read by a process that does not say so, or
 * labelled for a process that never reads it, fails here.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { ENV } from '../../bin/env-catalogue.js';
import type { Service, VarSpec } from '../../shared/config.js';
import { limiterConfig } from '../../limiter/config.js';
import { controlPlaneConfig } from '../../limiter/control-plane/config.js';
import { notifierConfig } from '../../notifier/config.js';
import { sandboxConfig } from '../../sandbox/config.js';
import { identityConfig } from '../../identity/config.js';
import { consoleConfig } from '../../console/config.js';
import { SHARED_ENV } from '../../shared/env.js';
import { LIMITER_ENV } from '../../limiter/env.js';
import { CONTROL_PLANE_ENV } from '../../limiter/control-plane/env.js';
import { NOTIFIER_ENV } from '../../notifier/env.js';
import { IDENTITY_ENV } from '../../identity/env.js';
import { CONSOLE_ENV } from '../../console/env.js';
import { SANDBOX_ENV } from '../../sandbox/env.js';
import { TOOLS_ENV } from '../../bin/env.js';
import { SERVER_ENV } from '../harness/tiers.js';
import { adminCliConfig, healthcheckConfig, keysCliConfig, quotaCliConfig, startConfig } from '../../bin/config.js';
import { sourceUrl } from '../harness/source.js';

// The harness reads its servers' addresses with need('NAME', …) (test/harness/env.ts).
const harnessSource = readFileSync(new URL('../harness/env.ts', sourceUrl(import.meta.url)), 'utf8');
// It also hands the servers' variables (tiers.ts SERVER_ENV) to the test processes, which read the
// template database's name directly (test/harness/db.ts).
const harnessReads = [...new Set([...[...harnessSource.matchAll(/need\('([A-Z][A-Z0-9_]*)'/g)].map((m) => m[1]!), ...SERVER_ENV])];

const readers: Record<Exclude<Service, 'all'>, readonly string[]> = {
  limiter: Object.keys(limiterConfig),
  'control-plane': Object.keys(controlPlaneConfig),
  notifier: Object.keys(notifierConfig),
  identity: Object.keys(identityConfig),
  console: Object.keys(consoleConfig),
  sandbox: Object.keys(sandboxConfig),
  start: Object.keys(startConfig),
  cli: [...Object.keys(quotaCliConfig), ...Object.keys(keysCliConfig), ...Object.keys(adminCliConfig)],
  healthcheck: Object.keys(healthcheckConfig),
  test: harnessReads,
};
/** `all`: every long-running service reads it. */
const ALL: readonly (keyof typeof readers)[] = ['limiter', 'control-plane', 'notifier', 'identity', 'sandbox'];

t.ok(harnessReads.length > 0, 'the harness reads some variables (the pattern still matches test/harness/env.ts)');

t.test('every variable is labelled with exactly the processes that read it', async (t) => {
  for (const [name, spec] of Object.entries(ENV) as [string, VarSpec<unknown>][]) {
    const actual = (Object.keys(readers) as (keyof typeof readers)[]).filter((r) => readers[r].includes(name)).sort();
    if (spec.services.includes('all')) {
      const missing = ALL.filter((r) => !actual.includes(r));
      t.same(missing, [], `${name} is labelled "all": every service reads it`);
      continue;
    }
    t.same([...spec.services].sort(), actual, `${name}: labels ${JSON.stringify(spec.services)} match its readers`);
  }
});

t.test('every variable a process reads is in the catalogue', async (t) => {
  for (const [reader, names] of Object.entries(readers)) {
    for (const n of names) t.ok(n in ENV, `${reader} reads ${n}, which the catalogue lists`);
  }
});

// Each variable is declared by its owner (issue 28): the one service that reads it, beside that
// service's composition root; shared/env.ts holds only what several services read; bin/env.ts what
// only the tools (start, the CLIs, the health check, the test harness) read.
const TOOLS: readonly Service[] = ['start', 'cli', 'healthcheck', 'test'];
const OWNED: [string, Record<string, VarSpec<unknown>>, Service | undefined][] = [
  ['limiter/env.ts', LIMITER_ENV, 'limiter'],
  ['limiter/control-plane/env.ts', CONTROL_PLANE_ENV, 'control-plane'],
  ['notifier/env.ts', NOTIFIER_ENV, 'notifier'],
  ['identity/env.ts', IDENTITY_ENV, 'identity'],
  ['console/env.ts', CONSOLE_ENV, 'console'],
  ['sandbox/env.ts', SANDBOX_ENV, 'sandbox'],
  ['bin/env.ts', TOOLS_ENV, undefined],
];

t.test('each variable is declared by the one service that reads it; shared/env.ts only those several read', async (t) => {
  for (const [file, vars, owner] of OWNED) {
    for (const [name, spec] of Object.entries(vars)) {
      const services = spec.services.filter((s) => !TOOLS.includes(s));
      t.same(services, owner === undefined ? [] : [owner], `${name} (${file}) is read by ${owner ?? 'the tools only'}`);
    }
  }
  for (const [name, spec] of Object.entries(SHARED_ENV) as [string, VarSpec<unknown>][]) {
    const services = spec.services.filter((s) => !TOOLS.includes(s));
    t.ok(
      services.includes('all') || services.length > 1,
      `${name} (shared/env.ts) is read by more than one service: ${services.join(', ')}`,
    );
  }
});
