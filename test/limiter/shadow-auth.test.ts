// @tier: pure
/**
 * Shadow mode relaxes quotas, never authentication or ownership (issue 23, item 3: with
 * LIMITER_SHADOW=true a never-issued API key reached the upstream as a service caller). For each
 * way shadow mode can be on — global (LIMITER_SHADOW), the caller's own quota record, the
 * caller's plan — each way a caller is not who it claims or not allowed — an unknown API key, an
 * expired token, a token signed by a key identity no longer publishes, another user's path — is
 * answered exactly as a sidecar without shadow mode answers it (status and body byte for byte;
 * the unknown key with its decoy 429), and the raw upstream receives nothing.
 *
 * Each shadow sidecar also shows its shadow mode is on: a known caller past its quota is
 * forwarded, so a case that passed only because shadow mode was off would fail there.
 */
import t, { type Test } from 'tap';
import { accessClaims, generateTestKey, jwksOf, sign, startJwksServer, type TestKey } from '../harness/tokens.js';
import { startRawUpstream } from './fixtures/raw-upstream.js';
import { openSocket, readResponses, type ParsedResponse } from './fixtures/raw.js';
import { fixedQuota, keySubject, newApiKey, startTestSidecar, type QuotaJson, type TestSidecar } from './fixtures/sidecar.js';

const up = await startRawUpstream(t);
const KNOWN = newApiKey('known');
const SENTINEL = newApiKey('sentinel');
const HOST = 'shadow.test';

interface Mode {
  name: string;
  env: Record<string, string>;
  quotas: QuotaJson[];
}

// Every sidecar: the sentinel key (never in shadow, never spent), and KNOWN and alice with a burst
// of 1, in shadow or not as the mode says.
const base = (shadow: { key?: boolean; alice?: boolean; plan?: boolean }): QuotaJson[] => [
  fixedQuota(keySubject(SENTINEL), 1_000_000),
  fixedQuota('plan:default', 1, { plan: 'default', ...(shadow.plan ? { shadow: true } : {}) }),
  // KNOWN takes the default plan by reference when the plan is what is in shadow.
  shadow.plan
    ? { subject_id: keySubject(KNOWN), rate: 0, plan: 'default' }
    : fixedQuota(keySubject(KNOWN), 1, shadow.key ? { shadow: true } : {}),
  // Alice has no record of her own in the plan mode: the default plan is hers.
  ...(shadow.plan ? [] : [fixedQuota('user:alice', 1, shadow.alice ? { shadow: true } : {})]),
];

const CONTROL: Mode = { name: 'no shadow mode (the reference)', env: {}, quotas: base({}) };
const MODES: Mode[] = [
  { name: 'global shadow mode (LIMITER_SHADOW=true)', env: { LIMITER_SHADOW: 'true' }, quotas: base({}) },
  { name: 'shadow quota (the caller’s own record)', env: {}, quotas: base({ key: true, alice: true }) },
  { name: 'shadow plan (the default plan)', env: {}, quotas: base({ plan: true }) },
];

interface Edge {
  sc: TestSidecar;
  current: TestKey;
  retired: TestKey;
  /** The status of a token of the retired key while it was still published (200 expected). */
  whilePublished: number | undefined;
  /** The status of a token with a kid nobody publishes, which made the sidecar refetch (401 expected). */
  unknownKid: number | undefined;
}

/**
 * A sidecar that fetches its key set from a JWKS server publishing `current` and `retired`, then
 * `current` only. (No assertion here: it also runs at the top level, where tap takes one as the
 * end of the file.)
 */
async function startEdge(t: Test, mode: Mode): Promise<Edge> {
  const current = await generateTestKey('ES256');
  const retired = await generateTestKey('ES256');
  const jwks = await startJwksServer(jwksOf(current, retired));
  t.teardown(() => jwks.close());
  const sc = await startTestSidecar(t, {
    upstream: up.url,
    quotas: mode.quotas,
    key: current,
    fetchJwks: true,
    env: {
      LIMITER_ROUTES: `/v1=${up.url},/api/v1=${up.url}`,
      JWKS_URL: jwks.url,
      // An unknown kid refetches the set at once: the retirement below takes effect on the next request.
      JWKS_REFETCH_COOLDOWN: '0s',
      ...mode.env,
    },
  });
  const edge: Edge = { sc, current, retired, whilePublished: undefined, unknownKid: undefined };
  // The retired key is trusted while it is published...
  const before = await send(sc, `GET /api/v1/users/alice/profile HTTP/1.1`, [`Authorization: Bearer ${token(edge, retired)}`]);
  edge.whilePublished = before?.status;
  // ...then identity stops publishing it, and a token with a kid the sidecar does not know makes it refetch.
  jwks.setKeys(jwksOf(current));
  const stranger = await generateTestKey('ES256');
  edge.unknownKid = (await send(sc, 'GET /v1/x HTTP/1.1', [`Authorization: Bearer ${token(edge, stranger)}`]))?.status;
  return edge;
}

function keyRetired(t: Test, e: Edge): void {
  t.equal(e.whilePublished, 200, 'a token of the retired key was accepted while its key was published');
  t.equal(e.unknownKid, 401, 'a token with an unknown kid is refused (and the key set refetched without the retired key)');
}

function token(e: Edge, key: TestKey, overrides: Record<string, unknown> = {}): string {
  return sign(accessClaims({ nowMs: e.sc.clock.now() }, { sub: 'alice', user_id: 'alice', ...overrides }), { key });
}

/** One request as raw bytes on a new connection; its one response. */
async function send(sc: TestSidecar, requestLine: string, headers: string[]): Promise<ParsedResponse | undefined> {
  const s = await openSocket(sc.sidecar.port);
  const reading = readResponses(s, 1, 5_000);
  s.write(Buffer.from([requestLine, `Host: ${HOST}`, ...headers].join('\r\n') + '\r\n\r\n', 'latin1'));
  return (await reading).responses[0];
}

let sentinels = 0;
/** Asserts nothing reached the upstream since `before`: a sentinel request sent now must be the only one recorded. */
async function nothingForwarded(t: Test, sc: TestSidecar, before: number): Promise<void> {
  const target = `/v1/sentinel-${++sentinels}`;
  const answered = send(sc, `GET ${target} HTTP/1.1`, [`X-API-Key: ${SENTINEL}`]);
  await up.waitForTarget(target);
  t.equal((await answered)?.status, 200, 'the sentinel request is forwarded');
  t.same(
    up.requests.slice(before).map((r) => r.requestLine),
    [`GET ${target} HTTP/1.1`],
    'nothing but the sentinel reached the upstream',
  );
}

interface Case {
  what: string;
  status: number;
  code: string;
  request: (e: Edge) => { line: string; headers: string[] };
}

const CASES: Case[] = [
  {
    what: 'a never-issued API key on another user’s path',
    status: 429,
    code: 'rate_limited',
    request: () => ({ line: 'GET /api/v1/users/bob/profile HTTP/1.1', headers: ['X-API-Key: never-issued'] }),
  },
  {
    what: 'an expired token',
    status: 401,
    code: 'token_expired',
    request: (e) => {
      const now = Math.floor(e.sc.clock.now() / 1000);
      const expired = token(e, e.current, { exp: now - 3600, iat: now - 7200, nbf: undefined });
      return { line: 'GET /api/v1/users/alice/profile HTTP/1.1', headers: [`Authorization: Bearer ${expired}`] };
    },
  },
  {
    what: 'a token signed by a key identity no longer publishes',
    status: 401,
    code: 'invalid_token',
    request: (e) => ({ line: 'GET /api/v1/users/alice/profile HTTP/1.1', headers: [`Authorization: Bearer ${token(e, e.retired)}`] }),
  },
  {
    what: 'a valid token on another user’s path',
    status: 403,
    code: 'forbidden',
    request: (e) => ({ line: 'GET /api/v1/users/bob/profile HTTP/1.1', headers: [`Authorization: Bearer ${token(e, e.current)}`] }),
  },
];

const control = await startEdge(t, CONTROL);
/** What the sidecar without shadow mode answers each case: the bodies the shadow sidecars must match. */
const reference = new Map<string, ParsedResponse | undefined>();
for (const c of CASES) {
  const r = c.request(control);
  reference.set(c.what, await send(control.sc, r.line, r.headers));
}

t.test('the reference sidecar (no shadow mode) refuses each case', async (t) => {
  keyRetired(t, control);
  for (const c of CASES) {
    const r = reference.get(c.what);
    t.equal(r?.status, c.status, `${c.what}: ${c.status}`);
    t.equal((JSON.parse(r?.body ?? '{}') as { code?: string }).code, c.code, `${c.what}: ${c.code}`);
  }
});

for (const mode of MODES) {
  t.test(mode.name, async (t) => {
    const e = await startEdge(t, mode);
    keyRetired(t, e);

    await t.test('shadow mode is on: a known key and a user past their quota are forwarded', async (t) => {
      const key = [
        await send(e.sc, 'GET /v1/k HTTP/1.1', [`X-API-Key: ${KNOWN}`]),
        await send(e.sc, 'GET /v1/k HTTP/1.1', [`X-API-Key: ${KNOWN}`]),
      ];
      t.same(
        key.map((r) => r?.status),
        [200, 200],
        'the key’s second request (burst 1) is forwarded',
      );
      const alice = `Authorization: Bearer ${token(e, e.current)}`;
      const user = [
        await send(e.sc, 'GET /api/v1/users/alice/profile HTTP/1.1', [alice]),
        await send(e.sc, 'GET /api/v1/users/alice/profile HTTP/1.1', [alice]),
      ];
      t.same(
        user.map((r) => r?.status),
        [200, 200],
        'alice’s second request (burst 1, counting the one before the key set changed) is forwarded',
      );
    });

    for (const c of CASES) {
      await t.test(`${c.what}: ${c.status} ${c.code}, as without shadow mode; nothing upstream`, async (t) => {
        const before = up.requests.length;
        const r = c.request(e);
        const got = await send(e.sc, r.line, r.headers);
        const want = reference.get(c.what);
        t.equal(got?.status, c.status, `status ${c.status}`);
        t.equal((JSON.parse(got?.body ?? '{}') as { code?: string }).code, c.code, `code ${c.code}`);
        t.equal(got?.body, want?.body, 'the body, byte for byte, is the one without shadow mode');
        t.match(got?.header('content-type') ?? '', /^application\/problem\+json/, 'problem+json');
        if (c.status === 429) {
          t.equal(got?.header('x-ratelimit-remaining'), '0', 'the decoy: remaining 0');
          t.match(got?.header('retry-after') ?? '', /^\d+$/, 'the decoy: Retry-After');
        }
        await nothingForwarded(t, e.sc, before);
      });
    }
  });
}
