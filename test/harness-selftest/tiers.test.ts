// @tier: pure
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAlone, isPure, pureEnv, selectTests, splitByTier } from '../harness/tiers.js';
import { testDatabaseUrl, testRedisClusterNodes, testRedisUrl } from '../harness/env.js';

t.test('the marker counts only alone on the first line', async (t) => {
  t.ok(isPure('// @tier: pure\nimport t from "tap";'));
  t.ok(isPure('// @tier: pure'), 'a file of one line');
  t.ok(isPure('// @tier: pure  \r\nimport t'), 'trailing space and CRLF');
  t.notOk(isPure('import t from "tap";\n// @tier: pure'), 'not below the first line');
  t.notOk(isPure('// @tier: servers\n'), 'another tier');
  t.notOk(isPure('//@tier: pure\n'), 'not a near miss');
  t.notOk(isPure(''), 'an empty (or unreadable) file needs servers');
});

t.test('the alone marker counts on the first line, or the second after the pure marker', async (t) => {
  t.ok(isAlone('// @alone\nimport t from "tap";'));
  t.ok(isAlone('// @tier: pure\n// @alone\nimport t'));
  t.ok(isAlone('// @tier: pure\r\n// @alone \r\nimport t'), 'trailing space and CRLF');
  t.notOk(isAlone('/** doc */\n// @alone\n'), 'not below a first line that is not the pure marker');
  t.notOk(isAlone('// @tier: pure\n/** doc */\n// @alone'), 'not below the second line');
  t.notOk(isAlone('//@alone\n'), 'not a near miss');
  t.notOk(isAlone(''));
});

t.test('files and folders select test files; everything else goes to tap', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tiers-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'sub'));
  writeFileSync(join(dir, 'a.test.ts'), '// @tier: pure\n');
  writeFileSync(join(dir, 'sub', 'b.test.ts'), 'import t from "tap";\n');
  writeFileSync(join(dir, 'sub', 'helpers.ts'), '// @tier: pure\n');

  const all = selectTests(['--bail'], dir);
  t.same(
    all,
    { options: ['--bail'], files: [join(dir, 'a.test.ts'), join(dir, 'sub', 'b.test.ts')] },
    'no path: every test file, not helpers',
  );
  t.same(selectTests([join(dir, 'sub'), '--timeout', '60'], dir), { options: ['--timeout', '60'], files: [join(dir, 'sub', 'b.test.ts')] });
  t.same(selectTests([join(dir, 'a.test.ts'), join(dir, 'a.test.ts')], dir).files, [join(dir, 'a.test.ts')], 'named once');

  const none = { pure: [], servers: [] };
  t.same(splitByTier(all.files), { pure: [join(dir, 'a.test.ts')], servers: [join(dir, 'sub', 'b.test.ts')], alone: none });
  t.same(
    splitByTier([join(dir, 'missing.test.ts')]),
    { pure: [], servers: [join(dir, 'missing.test.ts')], alone: none },
    'unreadable: servers',
  );

  writeFileSync(join(dir, 'c.test.ts'), '// @tier: pure\n// @alone\n');
  writeFileSync(join(dir, 'd.test.ts'), '// @alone\nimport t from "tap";\n');
  t.same(
    splitByTier([...all.files, join(dir, 'c.test.ts'), join(dir, 'd.test.ts')]),
    {
      pure: [join(dir, 'a.test.ts')],
      servers: [join(dir, 'sub', 'b.test.ts')],
      alone: { pure: [join(dir, 'c.test.ts')], servers: [join(dir, 'd.test.ts')] },
    },
    'alone files apart, by whether they need the servers',
  );
});

t.test('the pure pass has no server addresses, and asking for one names the marker', async (t) => {
  const env = pureEnv({
    PATH: '/bin',
    DATABASE_URL: 'postgres://x/y',
    REDIS_URL: 'redis://x',
    TEST_REDIS_CLUSTER_NODES: 'x:1',
    TEST_DATABASE_TEMPLATE: 't_template_x',
  });
  t.same(env, { PATH: '/bin', TEST_TIER: 'pure' });

  // This file is itself pure: under `npm test` the variables are unset and TEST_TIER is `pure`.
  const saved = { ...process.env };
  t.teardown(() => {
    for (const k of ['TEST_TIER', 'DATABASE_URL', 'REDIS_URL', 'TEST_REDIS_CLUSTER_NODES']) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });
  process.env.TEST_TIER = 'pure';
  process.env.DATABASE_URL = 'postgres://leaked/db'; // even if an address leaks in, a pure file may not use it
  const marker =
    /is not set: this test file is marked `\/\/ @tier: pure`, so `npm test` runs it without PostgreSQL, Redis or the Redis Cluster; remove the marker from its first line if it needs them$/;
  t.throws(() => testDatabaseUrl(), { message: marker });
  t.throws(() => testRedisUrl(), { message: /^REDIS_URL is not set: this test file is marked/ });
  t.throws(() => testRedisClusterNodes(), { message: /^TEST_REDIS_CLUSTER_NODES is not set: this test file is marked/ });
});
