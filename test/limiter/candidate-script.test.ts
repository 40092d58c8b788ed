/**
 * Versioning (limiter/admission/README.md): a new limiter script dual-runs in shadow
 * (LIMITER_CANDIDATE_SCRIPT) beside
 * the enforcing one, writing its own keys; the enforcing script alone decides, and disagreements
 * are counted on /metrics.
 */
import t from 'tap';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIT_LUA } from '../../limiter/admission/admit-script.js';
import { testRedisUrl } from '../harness/env.js';
import { testKeyPrefix } from '../harness/redis.js';
import { fixedQuota, keySubject, metricSum, newApiKey, parseMetrics, startTestSidecar } from './fixtures/sidecar.js';
import { startUpstream } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';

t.test('a candidate script runs in shadow: the enforcing one decides, disagreements are counted', async (t) => {
  // The candidate doubles every burst: it would admit where the enforcing script denies.
  const generous = ADMIT_LUA.replace(
    'ALGORITHMS[alg](tonumber(ARGV[2]), tonumber(ARGV[3])',
    'ALGORITHMS[alg](tonumber(ARGV[2]), 2 * tonumber(ARGV[3])',
  );
  t.not(generous, ADMIT_LUA, 'the candidate really differs');
  const dir = await mkdtemp(join(tmpdir(), 'candidate-'));
  const script = join(dir, 'candidate.lua');
  await writeFile(script, generous);

  const up = await startUpstream();
  t.teardown(() => up.close());
  const key = newApiKey();
  const sc = await startTestSidecar(t, {
    upstream: up.url,
    quotas: [fixedQuota(keySubject(key), 5)],
    env: {
      REDIS_URL: testRedisUrl(),
      LIMITER_REDIS_PREFIX: testKeyPrefix('candidate')
        .replace(/[^A-Za-z0-9_.-]/g, '_')
        .slice(0, 32),
      LIMITER_CANDIDATE_SCRIPT: script,
      LIMITER_CANDIDATE_LAYOUT: 'v2',
    },
  });
  const statuses: number[] = [];
  for (let i = 0; i < 12; i++) {
    const r = await fetch(`${sc.base}/v1/x`, { headers: { 'x-api-key': key } });
    await r.arrayBuffer();
    statuses.push(r.status);
  }
  t.equal(statuses.filter((s) => s === 200).length, 5, 'the enforcing script decides: exactly the burst admitted');
  const disagreements = await waitFor(
    async () => {
      const n = metricSum(parseMetrics(await (await fetch(`${sc.admin}/metrics`)).text()), 'ratelimit_shadow_script_disagreements');
      return n >= 5 && n;
    },
    { what: 'the shadow comparisons of requests 6 to 10' },
  );
  t.equal(disagreements, 5, 'requests 6 to 10: denied, the candidate would have admitted');
});

t.test('an unreadable candidate script stops the sidecar naming the variable', async (t) => {
  await t.rejects(startTestSidecar(t, { env: { REDIS_URL: testRedisUrl(), LIMITER_CANDIDATE_SCRIPT: '/nonexistent/candidate.lua' } }), {
    name: 'ConfigError',
    message: 'config: LIMITER_CANDIDATE_SCRIPT cannot be read: ENOENT',
  });
});
