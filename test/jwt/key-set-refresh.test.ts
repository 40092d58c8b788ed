// @tier: pure
/**
 * The remote key set's background refresh (README, "Revoking a signing key": a revoked key must
 * stop verifying within
 * seconds, not at the next lazy refresh 10 minutes on): the timer alone picks up a removed kid, a
 * 304 keeps the set, a failed fetch keeps the last good set, close() stops the timer. Against a
 * real HTTP server that serves a strong ETag and honours If-None-Match, like identity's.
 *
 * No test sleeps: each waits for the server to have seen the requests it needs, or drives a
 * refresh directly with `refreshInBackground()`. The clock given to the key set is frozen, which
 * also shows that the timer does not depend on the injected clock moving (a sidecar under a
 * FakeClock still refreshes).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Writable } from 'node:stream';
import t, { type Test } from 'tap';
import { createLogger } from '../../shared/log.js';
import { createVerifier, TokenError } from '../../shared/jwt/index.js';
import { KeySet } from '../../shared/jwt/key-set.js';
import { waitFor } from '../harness/wait.js';
import { accessClaims, generateTestKey, jwksOf, sign, TEST_AUDIENCE, TEST_ISSUER, type JwksDoc } from '../harness/tokens.js';
import { PLAIN_NODE, plainNodeArgs } from '../harness/child.js';

const T0 = Date.UTC(2025, 0, 15, 12, 0, 0);
/** Short enough that waiting for a few ticks is quick; the timer itself is what is tested. */
const INTERVAL = 20;

const k1 = await generateTestKey('ES256', 'k-1');
const k2 = await generateTestKey('ES256', 'k-2');

interface EtagServer {
  url: string;
  /** Requests per query string (`?a`, `?b`), so two key sets can share one server. */
  hits(tag?: string): number;
  /** Responses with status 304 so far. */
  readonly notModified: number;
  /** The If-None-Match header of the latest request. */
  readonly lastIfNoneMatch: string | undefined;
  setKeys(doc: JwksDoc): void;
  setFailing(on: boolean): void;
  close(): Promise<void>;
}

const etagOf = (body: string): string => `"${createHash('sha256').update(body).digest('base64url')}"`;

async function startEtagServer(t: Test, initial: JwksDoc): Promise<EtagServer> {
  let body = JSON.stringify(initial);
  let failing = false;
  let notModified = 0;
  let lastIfNoneMatch: string | undefined;
  const hits = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const tag = new URL(req.url ?? '/', 'http://x').search;
    hits.set(tag, (hits.get(tag) ?? 0) + 1);
    lastIfNoneMatch = req.headers['if-none-match'];
    if (failing) {
      res.writeHead(503, { 'content-type': 'text/plain' }).end('down');
      return;
    }
    const etag = etagOf(body);
    if (lastIfNoneMatch === etag) {
      notModified++;
      res.writeHead(304, { etag }).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), etag }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const s: EtagServer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`,
    hits: (tag) => (tag === undefined ? [...hits.values()].reduce((a, b) => a + b, 0) : (hits.get(tag) ?? 0)),
    get notModified() {
      return notModified;
    },
    get lastIfNoneMatch() {
      return lastIfNoneMatch;
    },
    setKeys(doc) {
      body = JSON.stringify(doc);
    },
    setFailing(on) {
      failing = on;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  t.teardown(() => s.close());
  return s;
}

function keySet(
  t: Test,
  url: string,
  opts: { refreshIntervalMs?: number; now?: () => number; log?: ReturnType<typeof createLogger> } = {},
): KeySet {
  const ks = new KeySet({
    jwksUrl: new URL(url),
    cooldownMs: 30_000,
    maxAgeMs: 600_000,
    refreshIntervalMs: opts.refreshIntervalMs ?? INTERVAL,
    fetchTimeoutMs: 2_000,
    now: opts.now ?? (() => T0),
    log: opts.log,
  });
  t.teardown(() => ks.close());
  return ks;
}

t.test('the timer alone drops a kid removed from the JWKS: no verification triggers it', async (t) => {
  const server = await startEtagServer(t, jwksOf(k1, k2));
  const ks = keySet(t, server.url);
  await ks.ready();
  t.same(ks.stats().keyIds.sort(), ['k-1', 'k-2']);
  // Several 304s first: the set is current and stays so.
  await waitFor(() => server.notModified >= 3, { what: 'three conditional refreshes' });
  t.ok(ks.get('k-1'), 'k-1 still there while the JWKS lists it');

  server.setKeys(jwksOf(k2)); // k-1 revoked at identity
  await waitFor(() => ks.get('k-1') === undefined, { what: 'the timer to drop k-1' });
  t.same(ks.stats().keyIds, ['k-2'], 'the 200 replaced the set whole');
  t.ok(ks.get('k-2'), 'the other key is kept');
  t.ok(ks.stats().fetches >= 5, 'every fetch was the timer: the clock is frozen, the cooldown untouched');
});

t.test('through the verifier: a cached token of the removed key is refused once the timer has run', async (t) => {
  const server = await startEtagServer(t, jwksOf(k1, k2));
  const v = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, jwksUrl: server.url, jwksRefreshIntervalMs: INTERVAL });
  t.teardown(() => v.close());
  await v.ready();
  const token = sign(accessClaims({ nowMs: Date.now() }), { key: k1 });
  t.equal((await v.verifyAccessToken(token)).sub, 'user-1', 'accepted while k-1 is published');
  t.equal(v.stats().cachedTokens, 1, 'and cached');

  server.setKeys(jwksOf(k2));
  await waitFor(() => !v.stats().keyIds.includes('k-1'), { what: 'the verifier to drop k-1' });
  const err = await v.verifyAccessToken(token).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof TokenError, 'refused');
  t.match(err, { reason: 'kid_unknown', code: 'invalid_token', status: 401 });
  t.equal((await v.verifyAccessToken(sign(accessClaims({ nowMs: Date.now() }), { key: k2 }))).sub, 'user-1', 'k-2 tokens still verify');
});

t.test('a 304 keeps the keys and counts as fresh', async (t) => {
  const server = await startEtagServer(t, jwksOf(k1));
  let now = T0;
  const ks = keySet(t, server.url, { refreshIntervalMs: 0, now: () => now });
  await ks.ready();
  t.equal(server.lastIfNoneMatch, undefined, 'the first fetch is unconditional');
  const first = ks.get('k-1');
  now += 60_000;
  t.equal(await ks.refreshInBackground(), true, 'a 304 is a successful refresh');
  t.equal(server.lastIfNoneMatch, etagOf(JSON.stringify(jwksOf(k1))), 'If-None-Match carries the ETag of the set held');
  t.equal(server.notModified, 1, 'answered 304');
  t.equal(ks.get('k-1'), first, 'the very same key object: cached verifications stay valid');
  t.same(ks.stats(), { keyIds: ['k-1'], loadedAtMs: now, fetches: 2, fetchFailures: 0, notModified: 1 }, 'fresh as of now');

  server.setKeys(jwksOf(k1, k2));
  t.equal(await ks.refreshInBackground(), true);
  t.same(ks.stats().keyIds.sort(), ['k-1', 'k-2'], 'a changed document is a 200 with the new set');
  t.equal(server.notModified, 1);
});

t.test('a failing fetch keeps the last good set; one warning per outage', async (t) => {
  const lines: string[] = [];
  const log = createLogger({
    service: 'test',
    level: 'debug',
    destination: new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    }),
  });
  const server = await startEtagServer(t, jwksOf(k1));
  const ks = keySet(t, server.url, { log });
  await ks.ready();
  server.setFailing(true);
  await waitFor(() => ks.stats().fetchFailures >= 3, { what: 'three failed refreshes' });
  t.same(ks.stats().keyIds, ['k-1'], 'the last good set is kept');
  t.ok(ks.get('k-1'));
  const warnings = lines.filter((l) => l.includes('jwks: fetch failed') && l.includes('"level":40'));
  t.equal(warnings.length, 1, 'the outage is logged once as a warning, not at every tick');

  server.setFailing(false);
  await waitFor(() => lines.some((l) => l.includes('jwks: fetch recovered')), { what: 'the recovery' });
  t.same(ks.stats().keyIds, ['k-1']);
});

t.test('close() stops the background refresh', async (t) => {
  const server = await startEtagServer(t, jwksOf(k1));
  const closed = keySet(t, `${server.url}?a`);
  const witness = keySet(t, `${server.url}?b`);
  await Promise.all([closed.ready(), witness.ready()]);
  await waitFor(() => server.hits('?a') >= 3, { what: 'the timer to run' });
  closed.close();
  // A fetch the timer started just before close() is aborted; it may still have reached the server.
  const atClose = server.hits('?a');
  const witnessAtClose = server.hits('?b');
  await waitFor(() => server.hits('?b') >= witnessAtClose + 10, { what: 'ten more ticks of a key set still running' });
  t.ok(server.hits('?a') <= atClose + 1, `the closed set fetched nothing after close (${server.hits('?a') - atClose})`);
  t.equal(await closed.refreshInBackground(), false, 'and refuses to start a fetch');
});

t.test('jwksRefreshIntervalMs is validated; 0 turns the timer off', async (t) => {
  t.throws(() => createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: jwksOf(k1), jwksRefreshIntervalMs: -1 }), {
    code: 'config_invalid',
    detail: /jwksRefreshIntervalMs must be between 0 and/,
  });
  const server = await startEtagServer(t, jwksOf(k1));
  const off = keySet(t, `${server.url}?off`, { refreshIntervalMs: 0 });
  const on = keySet(t, `${server.url}?on`);
  await Promise.all([off.ready(), on.ready()]);
  await waitFor(() => server.hits('?on') >= 5, { what: 'five ticks of a timed key set' });
  t.equal(server.hits('?off'), 1, 'with 0, only the first load');
});

t.test("the timer is unref'd: a process holding an unclosed key set still exits", async (t) => {
  const server = await startEtagServer(t, jwksOf(k1));
  // The compiled module (npm test builds dist/ first), in a child that never calls close().
  const module = pathToFileURL(resolve('dist/shared/jwt/key-set.js')).href;
  const script = `
    const { KeySet } = await import(${JSON.stringify(module)});
    const ks = new KeySet({ jwksUrl: new URL(${JSON.stringify(server.url)}), cooldownMs: 30000, maxAgeMs: 600000,
      refreshIntervalMs: 20, fetchTimeoutMs: 2000, now: Date.now });
    await ks.ready();
    console.log('loaded');`;
  // A plain node (test/harness/child.ts): no tap hook in the child whose exit is the point.
  const child = spawn(PLAIN_NODE, plainNodeArgs(['--input-type=module', '-e', script]), { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  // Not a time budget: a guard so a regression (a ref'd timer) fails this test instead of hanging it.
  const guard = setTimeout(() => child.kill(), 15_000);
  const exit = await new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  clearTimeout(guard);
  t.equal(out.trim(), 'loaded', 'the child loaded the set (so its timer was started)');
  t.equal(exit, 0, 'and exited by itself');
});
