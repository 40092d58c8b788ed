/**
 * Every variable the platform reads, gathered from the per-process declarations: shared/env.ts
 * (read by more than one process) and each process's own env.ts beside its composition root. The
 * README's configuration table is printed from it (bin/config-table.ts) and checked against it by
 * test/shared/config.test.ts in both directions. Only tools read the whole catalogue (`npm start`
 * passes variables on, the table, the tests); a service loads its own and the shared ones.
 */
import type { VarSpec } from '../shared/config.js';
import { SHARED_ENV } from '../shared/env.js';
import { LIMITER_ENV } from '../limiter/env.js';
import { CONTROL_PLANE_ENV } from '../limiter/control-plane/env.js';
import { NOTIFIER_ENV } from '../notifier/env.js';
import { IDENTITY_ENV } from '../identity/env.js';
import { CONSOLE_ENV } from '../console/env.js';
import { SANDBOX_ENV } from '../sandbox/env.js';
import { TOOLS_ENV } from './env.js';

const PARTS = { SHARED_ENV, LIMITER_ENV, CONTROL_PLANE_ENV, NOTIFIER_ENV, IDENTITY_ENV, CONSOLE_ENV, SANDBOX_ENV, TOOLS_ENV };

// A name declared twice would silently take the later declaration: refuse it when this loads.
const owner = new Map<string, string>();
for (const [part, vars] of Object.entries(PARTS) as [string, Record<string, VarSpec<unknown>>][]) {
  for (const name of Object.keys(vars)) {
    const first = owner.get(name);
    if (first !== undefined) throw new Error(`${name} is declared in both ${first} and ${part}`);
    owner.set(name, part);
  }
}

export const ENV = {
  ...SHARED_ENV,
  ...LIMITER_ENV,
  ...CONTROL_PLANE_ENV,
  ...NOTIFIER_ENV,
  ...IDENTITY_ENV,
  ...CONSOLE_ENV,
  ...SANDBOX_ENV,
  ...TOOLS_ENV,
};

export type EnvCatalog = typeof ENV;
