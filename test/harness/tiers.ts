/**
 * Test tiers: which test files need the run's servers (PostgreSQL, Redis, the Redis Cluster).
 *
 * A test file whose FIRST line is exactly `// @tier: pure` needs none of them; every other file is
 * treated as needing them. The marker is opt-in on purpose: a file without it (a new file, a file
 * whose author did not think about tiers) still gets the servers, so forgetting it costs only
 * speed. A pure file may start its own local fixtures (HTTP servers on port 0, a private
 * redis-server it kills for a fault test); it must not use the suite's shared servers.
 *
 * The runner (bin/test.mjs) runs the pure files in their own tap pass, before starting any server,
 * with DATABASE_URL, REDIS_URL and TEST_REDIS_CLUSTER_NODES removed from the environment and
 * TEST_TIER=pure set; test/harness/env.ts then throws a message naming the marker. So a file that
 * is marked pure but touches a server fails on every run, alone or in the full suite.
 *
 * Alone. A test that loads the CPU on purpose (a load test, a reshard under traffic, a file that
 * starts the whole platform) measures or provokes what a busy machine does, and it slows whatever
 * runs beside it into its timeouts. Such a file carries `// @alone` on its first line (its second
 * after the pure marker); the runner runs those last, one at a time (--jobs=1), after every
 * other file has finished, in their own tier (with the servers when they are not pure).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const PURE_MARKER = '// @tier: pure';

/** Marks a file that runs alone, after the others, one at a time (see above). */
export const ALONE_MARKER = '// @alone';

/** The variables that carry the servers' addresses (and the migrated template's name); unset for pure files. */
export const SERVER_ENV = ['DATABASE_URL', 'REDIS_URL', 'TEST_REDIS_CLUSTER_NODES', 'TEST_DATABASE_TEMPLATE'] as const;

/** Set to `pure` in the environment of the pure pass. */
export const TIER_ENV = 'TEST_TIER';

/** Whether a test file's source declares it pure: the marker alone on the first line. */
export function isPure(source: string): boolean {
  const nl = source.indexOf('\n');
  return (nl < 0 ? source : source.slice(0, nl)).trimEnd() === PURE_MARKER;
}

/** Whether a test file's source asks to run alone: the marker on its first line, or its second after the pure marker. */
export function isAlone(source: string): boolean {
  const [first = '', second = ''] = source.split('\n', 2).map((l) => l.trimEnd());
  return first === ALONE_MARKER || (first === PURE_MARKER && second === ALONE_MARKER);
}

/** Whether a path names a test file the suite runs (tap's `include` is `test/**\/*.test.ts`). */
export const isTestFile = (path: string): boolean => path.endsWith('.test.ts');

/** Every test file under `dir`, sorted. */
export function testFilesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && isTestFile(p)) out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

export interface Selection {
  /** Arguments for tap other than test files, in their order (options and their values). */
  options: string[];
  /** Test files named or found under a named folder; all of `test/` when none is named. */
  files: string[];
}

/**
 * Splits the runner's arguments: an argument that does not start with `-` and names an existing
 * file or folder selects test files (a folder: its `*.test.ts`, recursively); anything else is
 * passed to tap as is.
 */
export function selectTests(args: readonly string[], defaultDir = 'test'): Selection {
  const options: string[] = [];
  const files: string[] = [];
  let named = false;
  for (const a of args) {
    const st = a.startsWith('-') ? undefined : statSync(a, { throwIfNoEntry: false });
    if (st?.isDirectory()) {
      named = true;
      files.push(...testFilesUnder(a));
    } else if (st?.isFile()) {
      named = true;
      files.push(a);
    } else {
      options.push(a);
    }
  }
  return { options, files: named ? [...new Set(files)] : testFilesUnder(defaultDir) };
}

export interface Tiers {
  /** Pure files that may run beside others. */
  pure: string[];
  /** Files that need the servers and may run beside others. */
  servers: string[];
  /** Files marked `// @alone`, by whether they need the servers; run last, one at a time. */
  alone: { pure: string[]; servers: string[] };
}

/** The files of each tier; a file that cannot be read counts as needing servers. */
export function splitByTier(files: readonly string[], read: (f: string) => string = (f) => readFileSync(f, 'utf8')): Tiers {
  const out: Tiers = { pure: [], servers: [], alone: { pure: [], servers: [] } };
  for (const f of files) {
    let src = '';
    try {
      src = read(f);
    } catch {
      // tap reports the missing file in the servers pass
    }
    const tier = isAlone(src) ? out.alone : out;
    (isPure(src) ? tier.pure : tier.servers).push(f);
  }
  return out;
}

/** The environment of the pure pass: no server addresses, and the tier named. */
export function pureEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = { ...env, [TIER_ENV]: 'pure' };
  for (const name of SERVER_ENV) delete out[name];
  return out;
}
