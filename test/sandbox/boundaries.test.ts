// @tier: pure
/**
 * The sandbox is a service of its own (issue 28): no import cycles among its files, nothing from
 * notifier/ in it, and nothing of it in the notifier's code (the notifier's tests may start it).
 * It builds on shared/ only.
 */
import t from 'tap';
import { cyclesOf, graphOf, importsOf, sourcesUnder } from '../harness/imports.js';

const SANDBOX = sourcesUnder('sandbox');

t.test('the sandbox folder has its files', async (t) => {
  t.ok(SANDBOX.includes('sandbox/main.ts'), 'sandbox/main.ts');
  t.ok(SANDBOX.includes('sandbox/app.ts'), 'sandbox/app.ts');
});

t.test('no import cycle inside sandbox/ (type imports included)', async (t) => {
  t.same(
    cyclesOf(graphOf(SANDBOX)).map((c) => c.join(' → ')),
    [],
  );
});

t.test('sandbox/ imports only itself and shared/ (and packages)', async (t) => {
  const outside = SANDBOX.flatMap((f) =>
    importsOf(f)
      .filter((i) => !i.startsWith('sandbox/') && !i.startsWith('shared/'))
      .map((i) => `${f} → ${i}`),
  );
  t.same(outside, []);
});

t.test("the notifier's code imports nothing from sandbox/", async (t) => {
  const into = sourcesUnder('notifier').flatMap((f) =>
    importsOf(f)
      .filter((i) => i.startsWith('sandbox/'))
      .map((i) => `${f} → ${i}`),
  );
  t.same(into, []);
});

t.test('the checker sees what it must: a cycle through a type import, a re-export and import()', async (t) => {
  const graph = new Map([
    ['x/a.ts', ['x/b.ts']],
    ['x/b.ts', ['x/c.ts']],
    ['x/c.ts', ['x/a.ts']],
    ['x/d.ts', ['x/d.ts']],
    ['x/e.ts', ['x/a.ts']],
  ]);
  t.same(cyclesOf(graph), [
    ['x/a.ts', 'x/b.ts', 'x/c.ts', 'x/a.ts'],
    ['x/d.ts', 'x/d.ts'],
  ]);
  const src = [
    "import type { A } from './a.js';",
    "export { B } from '../y/b.js';",
    "const c = await import('./c.js');",
    "// import { D } from './d.js';",
    'const s = "from \'./e.js\'";',
    "import pg from 'pg';",
  ].join('\n');
  t.same(importsOf('x/f.ts', src), ['x/a.ts', 'x/c.ts', 'y/b.ts']);
});
