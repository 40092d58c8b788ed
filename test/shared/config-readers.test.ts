// @tier: pure
/**
 * The catalogue's "read by" labels (shared/env.ts `services`) are true: each variable names exactly
 * the processes whose pick lists read it. A variable read by a process that does not say so, or
 * labelled for a process that never reads it, fails here.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { ENV } from '../../shared/env.js';
import type { Service, VarSpec } from '../../shared/config.js';
import { limiterConfig } from '../../limiter/config.js';
import { controlPlaneConfig } from '../../limiter/control-plane/config.js';
import { notifierConfig } from '../../notifier/config.js';
import { sandboxConfig } from '../../notifier/sandbox/config.js';
import { identityConfig } from '../../identity/config.js';
import { consoleConfig } from '../../console/config.js';
import { adminCliConfig, healthcheckConfig, keysCliConfig, quotaCliConfig, startConfig } from '../../bin/config.js';

// The harness reads its servers' addresses with need('NAME', …) (test/harness/env.ts).
const harnessSource = readFileSync(new URL('../harness/env.ts', import.meta.url), 'utf8');
const harnessReads = [...harnessSource.matchAll(/need\('([A-Z][A-Z0-9_]*)'/g)].map((m) => m[1]!);

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
    for (const n of names) t.ok(n in ENV, `${reader} reads ${n}, which shared/env.ts lists`);
  }
});
