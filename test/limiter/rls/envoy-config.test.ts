// @tier: pure
/**
 * The Envoy configuration documented in limiter/rls/README.md (and the shorter one in the root
 * README), read from the Markdown and played against a real sidecar: its rate-limit filter points
 * at a cluster speaking HTTP/2 with a gRPC health check on the RLS's name; its routes' actions,
 * applied the way Envoy's documentation says each action builds an entry, produce descriptors our
 * rule reads as documented: an API-key caller counted by its key (not by address), a caller without
 * one by address, the /reports route by tenant:reports. Keeps the docs from drifting from the rule.
 *
 * Envoy's actions, as its route.v3.RateLimit.Action docs define them: `request_headers` gives
 * (descriptor_key, the header's value) and no descriptor at all when the header is absent;
 * `remote_address` gives ("remote_address", the client address); `generic_key` gives (descriptor_key
 * or "generic_key", descriptor_value); `header_value_match` gives (descriptor_key or "header_match",
 * descriptor_value) when the headers match as `expect_match` (default true) says, else no descriptor.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { RateLimitResponse_Code as Code, RateLimitService } from '../../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import { ENTRY_KEYS } from '../../../limiter/rls/descriptors.js';
import { startUpstream } from '../../harness/upstream.js';
import { parseYamlSubset, type YamlValue } from '../fixtures/yaml-subset.js';
import { fixedQuota, keySubject, newApiKey } from '../fixtures/sidecar.js';
import { rlsClient, shouldRateLimit, startRlsSidecar, type Entries } from './fixtures.js';
import { sourceUrl } from '../../harness/source.js';

type Y = { [key: string]: YamlValue };
const obj = (v: YamlValue | undefined): Y => {
  if (v === null || v === undefined || typeof v !== 'object' || Array.isArray(v)) throw new Error(`not a mapping: ${JSON.stringify(v)}`);
  return v;
};
const list = (v: YamlValue | undefined): YamlValue[] => {
  if (!Array.isArray(v)) throw new Error(`not a sequence: ${JSON.stringify(v)}`);
  return v;
};
const str = (v: YamlValue | undefined): string => {
  if (typeof v !== 'string') throw new Error(`not a scalar: ${JSON.stringify(v)}`);
  return v;
};

function yamlBlocks(file: string): Y[] {
  const md = readFileSync(new URL(`../../../${file}`, sourceUrl(import.meta.url)), 'utf8');
  // The Envoy configurations, and the Kubernetes probes beside them (every YAML block naming Envoy's RLS or filter).
  return [...md.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .map((m) => m[1]!)
    .filter((y) => y.includes('envoy.'))
    .map((y) => obj(parseYamlSubset(y)));
}

interface EnvoyRequest {
  path: string;
  method: string;
  headers: Record<string, string>;
  address: string;
}

/** The descriptors one rate_limits list produces for a request (undefined entries drop the descriptor). */
function descriptors(rateLimits: YamlValue[], req: EnvoyRequest): Entries[] {
  const header = (name: string): string | undefined =>
    name === ':path' ? req.path : name === ':method' ? req.method : req.headers[name.toLowerCase()];
  const out: Entries[] = [];
  for (const rl of rateLimits) {
    const entries: Entries = [];
    let produced = true;
    for (const action of list(obj(rl).actions)) {
      const [kind, raw] = Object.entries(obj(action))[0]!;
      const a = obj(raw);
      if (kind === 'request_headers') {
        const v = header(str(a.header_name));
        if (v === undefined) produced = false;
        else entries.push([str(a.descriptor_key), v]);
      } else if (kind === 'remote_address') {
        entries.push(['remote_address', req.address]);
      } else if (kind === 'generic_key') {
        entries.push([a.descriptor_key === undefined ? 'generic_key' : str(a.descriptor_key), str(a.descriptor_value)]);
      } else if (kind === 'header_value_match') {
        const matches = list(a.headers).every((h) => {
          const m = obj(h);
          if (m.present_match === undefined) throw new Error('only present_match header matchers are modelled');
          return (header(str(m.name)) !== undefined) === (str(m.present_match) === 'true');
        });
        const expect = a.expect_match === undefined || str(a.expect_match) === 'true';
        if (matches !== expect) produced = false;
        else entries.push([a.descriptor_key === undefined ? 'header_match' : str(a.descriptor_key), str(a.descriptor_value)]);
      } else {
        throw new Error(`action ${kind} is not modelled here`);
      }
    }
    if (produced) out.push(entries);
  }
  return out;
}

const [full] = yamlBlocks('limiter/rls/README.md');
const resources = obj(full!.static_resources);
const hcm = obj(obj(list(obj(list(obj(list(resources.listeners)[0]).filter_chains)[0]).filters)[0]).typed_config);
const routes = list(obj(list(obj(hcm.route_config).virtual_hosts)[0]).routes).map(obj);
const filter = obj(
  list(hcm.http_filters)
    .map(obj)
    .find((f) => str(f.name) === 'envoy.filters.http.ratelimit')!.typed_config,
);

function routeFor(path: string): YamlValue[] {
  const r = routes.find((x) => path.startsWith(str(obj(x.match).prefix)));
  if (!r) throw new Error(`no route for ${path}`);
  return list(obj(r.route).rate_limits);
}

t.test('the filter points at an HTTP/2 cluster health-checked on the RLS’s name', async (t) => {
  t.equal(str(filter['@type']), 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit');
  const rls = obj(filter.rate_limit_service);
  t.equal(str(rls.transport_api_version), 'V3', 'the v3 protocol the sidecar speaks');
  const clusterName = str(obj(obj(rls.grpc_service).envoy_grpc).cluster_name);
  const cluster = list(resources.clusters)
    .map(obj)
    .find((c) => str(c.name) === clusterName);
  t.ok(cluster, `cluster ${clusterName} is defined`);
  const http = obj(obj(cluster!.typed_extension_protocol_options)['envoy.extensions.upstreams.http.v3.HttpProtocolOptions']);
  t.ok(obj(http.explicit_http_config).http2_protocol_options !== undefined, 'gRPC needs HTTP/2');
  t.equal(str(obj(obj(list(cluster!.health_checks)[0]).grpc_health_check).service_name), RateLimitService.typeName);
});

t.test('every descriptor key the documented configurations produce is one the rule reads, or knowingly ignored', async (t) => {
  const keys = new Set<string>();
  const collect = (v: YamlValue): void => {
    if (Array.isArray(v)) v.forEach(collect);
    else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (k === 'descriptor_key') keys.add(str(x));
        if (k === 'remote_address') keys.add('remote_address');
        if (k === 'generic_key' && obj(x).descriptor_key === undefined) keys.add('generic_key');
        collect(x);
      }
    }
  };
  for (const y of [...yamlBlocks('limiter/rls/README.md'), ...yamlBlocks('README.md')]) collect(y);
  const known = new Set<string>([...ENTRY_KEYS, 'anonymous']);
  t.same(
    [...keys].filter((k) => !known.has(k)),
    [],
  );
  t.ok(keys.has('api_key') && keys.has('path') && keys.has('remote_address'), 'the snippets were found');
});

t.test('the documented routes, played against a real sidecar', async (t) => {
  const up = await startUpstream();
  t.teardown(() => up.close());
  const key = newApiKey('envoy');
  const s = await startRlsSidecar(t, {
    upstream: up.url,
    quotas: [fixedQuota(keySubject(key), 3, { plan: 'gold' }), fixedQuota('tenant:reports', 2, { plan: 'reports' })],
    env: { LIMITER_IP_RATE: '1', LIMITER_IP_BURST: '2' },
  });
  const c = rlsClient(t, s.rls);
  const send = async (req: EnvoyRequest) => {
    const produced = descriptors(routeFor(req.path), req);
    return { produced, answer: await shouldRateLimit(c, produced) };
  };
  const address = '198.51.100.9';

  const keyed = await send({ path: '/v1/orders?page=2', method: 'GET', headers: { 'x-api-key': key }, address });
  t.same(
    keyed.produced,
    [
      [
        ['api_key', key],
        ['path', '/v1/orders?page=2'],
        ['method', 'GET'],
      ],
    ],
    'an API-key caller: one descriptor, no per-IP one',
  );
  t.same(
    [keyed.answer.overallCode, keyed.answer.statuses[0]!.limitRemaining, keyed.answer.statuses[0]!.currentLimit?.name],
    [Code.OK, 2, 'gold'],
  );

  const anon: number[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await send({ path: '/v1/orders', method: 'GET', headers: {}, address });
    t.same(r.produced[0]?.[0], ['anonymous', 'true'], 'without a key: the per-IP descriptor');
    anon.push(r.answer.overallCode);
  }
  t.same(anon, [Code.OK, Code.OK, Code.OVER_LIMIT], 'held to the per-IP cap (burst 2)');
  const keyedAgain = await send({ path: '/v1/orders', method: 'GET', headers: { 'x-api-key': key }, address });
  t.equal(keyedAgain.answer.overallCode, Code.OK, 'the key is not held to its address’s cap');

  const reports = [];
  for (let i = 0; i < 3; i++)
    reports.push((await send({ path: '/reports/daily', method: 'GET', headers: {}, address })).answer.overallCode);
  t.same(reports, [Code.OK, Code.OK, Code.OVER_LIMIT], '/reports: the tenant:reports bucket (burst 2)');
});
