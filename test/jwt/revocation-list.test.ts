// @tier: pure
/**
 * The revocation list a resource server holds (shared/jwt/revocation-list.ts): the pure set (merge
 * keeps the later expiry, nothing leaves before its expiry plus the tolerance, the hot path), the
 * document parser's refusals, and the fetching against a real HTTP server that serves a strong ETag
 * and honours If-None-Match like identity's: a 304 changes nothing, a failed fetch (500, garbage,
 * another issuer's list, the server gone) keeps every entry, and the verifier refuses a listed
 * token (cached or not) with `revoked`, the same 401 `invalid_token` as any bad token.
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { createVerifier, parseRevocationDocument, RevocationList, RevokedSet, TokenError } from '../../shared/jwt/index.js';
import { accessClaims, generateTestKey, jwksOf, sign, TEST_AUDIENCE, TEST_ISSUER } from '../harness/tokens.js';
import { waitFor } from '../harness/wait.js';

const T0 = Date.UTC(2026, 0, 15, 12, 0, 0);
const S0 = T0 / 1000;
const entries = (sid: Record<string, number>, jti: Record<string, number> = {}) => ({
  sid: new Map(Object.entries(sid)),
  jti: new Map(Object.entries(jti)),
});

t.test('RevokedSet: merge, sweep at expiry plus tolerance, the hot path', (t) => {
  const set = new RevokedSet(60);
  t.notOk(set.isRevoked('j', 's'), 'empty: nothing is revoked');
  set.merge(entries({ s1: S0 + 100 }, { j1: S0 + 50 }), T0);
  t.ok(set.isRevoked('other', 's1'), 'by family');
  t.ok(set.isRevoked('j1', undefined), 'by jti, for a token without a family');
  t.notOk(set.isRevoked('other', undefined));
  t.notOk(set.isRevoked('other', 's2'));

  // A later document without s1 (a lagging replica, a truncated list) does not bring it back.
  set.merge(entries({}), T0);
  t.ok(set.isRevoked('x', 's1'), 'an entry is never dropped by a document that lacks it');
  // The later expiry of an id listed twice wins.
  set.merge(entries({ s1: S0 + 10 }), T0);
  set.sweep(T0 + (100 + 60 - 1) * 1000);
  t.ok(set.isRevoked('x', 's1'), 'kept until exp + tolerance (the later exp)');
  t.notOk(set.isRevoked('j1', undefined), 'j1 left at its exp + tolerance');
  set.sweep(T0 + (100 + 60) * 1000);
  t.equal(set.size, 0, 'and s1 at its own');

  set.merge(entries({ old: S0 - 61 }), T0);
  t.equal(set.size, 0, 'an entry already past its expiry is not taken');
  t.end();
});

t.test('parseRevocationDocument refuses what is not a list of this issuer; skips bad entries', (t) => {
  t.throws(() => parseRevocationDocument([], 'i'), /not a JSON object/);
  t.throws(() => parseRevocationDocument(null, 'i'), /not a JSON object/);
  t.throws(() => parseRevocationDocument({ iss: 'other', sid: {} }, 'i'), /another issuer/);
  t.throws(() => parseRevocationDocument({ iss: 'i', sid: [] }, 'i'), /sid is not an object/);
  t.throws(() => parseRevocationDocument({ iss: 'i', jti: 'x' }, 'i'), /jti is not an object/);
  const d = parseRevocationDocument({ iss: 'i', sid: { a: 1, b: 'x', c: null, ['x'.repeat(257)]: 5 }, jti: { j: 2 } }, 'i');
  t.same([...d.sid], [['a', 1]], 'non-numbers and oversized ids are skipped');
  t.same([...d.jti], [['j', 2]]);
  t.same([...parseRevocationDocument({ iss: 'i' }, 'i').sid], [], 'members may be absent');
  t.end();
});

interface ListServer {
  url: string;
  hits: number;
  notModified: number;
  lastIfNoneMatch: string | undefined;
  set(doc: unknown): void;
  mode: 'ok' | 'error' | 'garbage';
  close(): Promise<void>;
}

async function startListServer(t: Test, initial: unknown): Promise<ListServer> {
  let body = JSON.stringify(initial);
  const s = {
    hits: 0,
    notModified: 0,
    lastIfNoneMatch: undefined as string | undefined,
    mode: 'ok' as ListServer['mode'],
  };
  const server: Server = createServer((req, res) => {
    s.hits++;
    s.lastIfNoneMatch = req.headers['if-none-match'];
    if (s.mode === 'error') return void res.writeHead(500).end('boom');
    if (s.mode === 'garbage') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"iss":');
    const etag = `"${createHash('sha256').update(body).digest('base64url')}"`;
    if (req.headers['if-none-match'] === etag) {
      s.notModified++;
      return void res.writeHead(304, { etag }).end();
    }
    res.writeHead(200, { 'content-type': 'application/json', etag }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  t.teardown(close);
  return Object.assign(s, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/revoked-tokens.json`,
    set(doc: unknown) {
      body = JSON.stringify(doc);
    },
    close,
  });
}

t.test('RevocationList: conditional fetches, failures keep every entry', async (t) => {
  const srv = await startListServer(t, { iss: TEST_ISSUER, complete: true, sid: { s1: S0 + 900 }, jti: {} });
  // A long interval: the test drives every fetch with refresh().
  const list = new RevocationList({
    url: new URL(srv.url),
    issuer: TEST_ISSUER,
    refreshIntervalMs: 3_600_000,
    fetchTimeoutMs: 2_000,
    clockToleranceSec: 60,
    now: () => T0,
  });
  t.teardown(() => list.close());
  await list.first;
  t.ok(list.settled);
  t.ok(list.isRevoked('x', 's1'), 'the first list is held');
  t.ok(await list.refresh());
  t.equal(srv.notModified, 1, 'an unchanged list is a 304');
  t.match(srv.lastIfNoneMatch, /^"/, 'asked with the ETag of the list held');

  srv.set({ iss: TEST_ISSUER, complete: true, sid: {}, jti: { j1: S0 + 900 } });
  t.ok(await list.refresh());
  t.ok(list.isRevoked('j1', undefined), 'a new entry');
  t.ok(list.isRevoked('x', 's1'), 'the one the new list lacks is kept until its expiry');

  for (const mode of ['error', 'garbage'] as const) {
    srv.mode = mode;
    t.notOk(await list.refresh(), `${mode}: the fetch fails`);
    t.ok(list.isRevoked('j1', undefined) && list.isRevoked('x', 's1'), `${mode}: every entry is kept`);
  }
  srv.mode = 'ok';
  srv.set({ iss: 'https://someone-else.test', sid: {}, jti: {} });
  t.notOk(await list.refresh(), "another issuer's list is refused");
  t.equal(list.stats().entries, 2);

  await srv.close();
  t.notOk(await list.refresh(), 'the issuer gone: the fetch fails');
  t.ok(list.isRevoked('j1', undefined) && list.isRevoked('x', 's1'), 'and the entries are kept');
  t.match(list.stats(), { entries: 2, fetchFailures: 4 });
});

t.test('RevocationList: the background timer picks a revocation up with no request', async (t) => {
  const srv = await startListServer(t, { iss: TEST_ISSUER, sid: {}, jti: {} });
  const list = new RevocationList({
    url: new URL(srv.url),
    issuer: TEST_ISSUER,
    refreshIntervalMs: 20,
    fetchTimeoutMs: 2_000,
    clockToleranceSec: 60,
    now: () => T0,
  });
  t.teardown(() => list.close());
  await list.first;
  srv.set({ iss: TEST_ISSUER, sid: { late: S0 + 60 }, jti: {} });
  await waitFor(() => list.isRevoked('x', 'late'), { what: 'the timer to fetch the new list' });
  t.pass('picked up by the timer');
  list.close();
  const hits = srv.hits;
  await waitFor(() => srv.hits === hits, { what: 'no fetch after close' });
  t.pass('close() stops the timer');
});

t.test('the verifier refuses a listed token, cached or not, as invalid_token; others pass', async (t) => {
  const key = await generateTestKey('ES256');
  const claims = (over: Record<string, unknown>) => accessClaims({ nowMs: Date.now() }, over);
  const revokedFamily = sign(claims({ sid: 'fam-1' }), { key });
  const revokedJti = sign(claims({ jti: 'jti-1' }), { key });
  const fine = sign(claims({ sid: 'fam-2' }), { key });
  const srv = await startListServer(t, { iss: TEST_ISSUER, sid: {}, jti: {} });
  const v = createVerifier({
    issuer: TEST_ISSUER,
    audience: TEST_AUDIENCE,
    keys: jwksOf(key),
    revocationListUrl: srv.url,
    revocationRefreshIntervalMs: 20,
  });
  t.teardown(() => v.close());
  t.equal((await v.verifyAccessToken(revokedFamily)).sid, 'fam-1', 'verified (and cached) before the revocation; sid is kept');
  await v.verifyAccessToken(revokedJti);
  srv.set({
    iss: TEST_ISSUER,
    sid: { 'fam-1': Math.floor(Date.now() / 1000) + 900 },
    jti: { 'jti-1': Math.floor(Date.now() / 1000) + 900 },
  });
  await waitFor(() => v.stats().revocations?.entries === 2, { what: 'the verifier to fetch the list' });
  for (const [name, token] of [
    ['a token of a revoked family', revokedFamily],
    ['a revoked access token', revokedJti],
  ] as const) {
    const err = await v.verifyAccessToken(token).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof TokenError, `${name}: refused`);
    t.match(err, { reason: 'revoked', code: 'invalid_token', status: 401 }, `${name}: 401 invalid_token`);
    t.same((err as TokenError).headers, { 'www-authenticate': 'Bearer error="invalid_token"' }, 'the challenge of any invalid token');
  }
  t.equal((await v.verifyAccessToken(fine)).sid, 'fam-2', 'a token of another family passes');
});

t.test('the verifier waits for the first list before its first verdict; an unreachable list lets tokens pass', async (t) => {
  const key = await generateTestKey('ES256');
  const token = sign(accessClaims({ nowMs: Date.now() }, { jti: 'listed' }), { key });
  const srv = await startListServer(t, { iss: TEST_ISSUER, jti: { listed: Math.floor(Date.now() / 1000) + 900 } });
  const v = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: jwksOf(key), revocationListUrl: srv.url });
  t.teardown(() => v.close());
  // Verified at once, before the first fetch could have answered: it waits for it.
  await t.rejects(
    v.verifyAccessToken(token),
    { name: 'TokenError', reason: 'revoked' },
    'the very first verification already knows the list',
  );

  const down = createVerifier({
    issuer: TEST_ISSUER,
    audience: TEST_AUDIENCE,
    keys: jwksOf(key),
    revocationListUrl: 'http://127.0.0.1:1/.well-known/revoked-tokens.json',
  });
  t.teardown(() => down.close());
  t.equal((await down.verifyAccessToken(token)).jti, 'listed', 'no list could be fetched: the token passes (logged)');
});
