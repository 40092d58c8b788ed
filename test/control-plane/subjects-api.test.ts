/**
 * The internal HTTP API by subject of every kind (for the operator console): the paged list with
 * its kind and prefix filters and opaque cursor, GET/PUT/DELETE by a URL-encoded subject id with
 * the PUT's acked and lagging sidecars, and the list of connected sidecars, over real PostgreSQL
 * with a real sidecar-like watcher.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { useTestDatabase } from '../harness/db.js';
import { waitFor } from '../harness/wait.js';
import { accessClaims, generateTestKey, jwksOf, sign, startJwksServer, TEST_AUDIENCE, TEST_ISSUER } from '../harness/tokens.js';
import { ADMIN_TOKEN, syncClient, TestWatcher, useControlPlane } from './helpers.js';

const db = await useTestDatabase(t, 'cp_subjects_api');
const key = await generateTestKey('ES256');
const jwks = await startJwksServer(jwksOf(key));
t.teardown(() => jwks.close());
const cp = await useControlPlane(t, db.url, {
  JWKS_URL: jwks.url,
  JWT_ISSUER: TEST_ISSUER,
  JWT_AUDIENCE: TEST_AUDIENCE,
  CONTROL_PLANE_ACK_TIMEOUT: '300ms',
});
const ADMIN = `Bearer ${ADMIN_TOKEN}`;
const token = (role: string): string => sign(accessClaims({ nowMs: Date.now() }, { role }), { key });

async function http(method: string, path: string, body?: unknown, auth: string | null = ADMIN) {
  const headers: Record<string, string> = {};
  if (auth !== null) headers.authorization = auth;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${cp.http}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
}

const subjectPath = (subject: string): string => `/internal/subjects/${encodeURIComponent(subject)}/quota`;
const own = { algorithm: 'token_bucket', rate: 10, burst: 20, unit: 'second' };
const KEY = `key:${createHash('sha256').update('sk_test_console').digest('hex')}`;

t.test('PUT, GET and DELETE by subject id: every kind, URL-encoded, same shapes as by API key', async (t) => {
  const plan = await http('PUT', subjectPath('plan:pro'), { ...own, rate: 100, burst: 100 });
  t.equal(plan.status, 201, 'a plan is created by its subject id');
  const user = await http('PUT', subjectPath('user:42'), { rate: 0, plan: 'pro' });
  t.equal(user.status, 201);
  t.equal((user.json!.quota as Record<string, unknown>).subject_id, 'user:42');
  t.same(Object.keys(user.json!).sort(), ['acked_sidecar_ids', 'lagging_sidecar_ids', 'quota', 'version']);
  t.equal(user.json!.version, (plan.json!.version as number) + 1);
  const slash = await http('PUT', subjectPath('tenant:acme/eu'), own);
  t.equal(slash.status, 201, 'an id with a slash travels encoded as one path segment');
  t.equal((slash.json!.quota as Record<string, unknown>).subject_id, 'tenant:acme/eu');
  t.equal((await http('PUT', subjectPath(KEY), own)).status, 201, 'a hashed key subject');
  const replaced = await http('PUT', subjectPath('user:42'), { ...own, rate: 7 });
  t.equal(replaced.status, 200, 'a second PUT replaces');

  const got = await http('GET', '/internal/subjects/user%3A42/quota');
  t.equal(got.status, 200);
  t.equal((got.json!.quota as Record<string, unknown>).rate, 7);
  t.equal((await http('GET', subjectPath('tenant:acme/eu'))).status, 200);

  const planGone = await http('DELETE', subjectPath('plan:pro'));
  t.equal(planGone.status, 204, 'a plan nothing references any more is deleted by its subject id');
  const del = await http('DELETE', subjectPath('user:42'));
  t.equal(del.status, 204);
  t.match(del.headers.get('quota-version'), /^\d+$/);
  const gone = await http('GET', subjectPath('user:42'));
  t.equal(gone.status, 404);
  t.equal(gone.json!.code, 'not_found');
  t.equal(gone.headers.get('content-type'), 'application/problem+json');
  t.equal((await http('DELETE', subjectPath('user:42'))).status, 404, 'deleting nothing is 404');
});

t.test('by subject: 400 problem+json naming the field', async (t) => {
  const cases: [string, string, unknown, string][] = [
    ['unknown kind', subjectPath('ip:10.0.0.1'), own, 'subject'],
    ['raw key as a subject', subjectPath('key:sk_live_raw'), own, 'subject'],
    ['subject_id in the body', subjectPath('user:1'), { ...own, subject_id: 'user:2' }, 'subject_id'],
    ['no rate', subjectPath('user:1'), { algorithm: 'token_bucket', burst: 1, unit: 'second' }, 'rate'],
    ['unknown algorithm', subjectPath('user:1'), { ...own, algorithm: 'gcra' }, 'algorithm'],
    ['missing plan', subjectPath('user:1'), { rate: 0, plan: 'nope' }, 'plan'],
  ];
  for (const [name, path, body, field] of cases) {
    const r = await http('PUT', path, body);
    t.equal(r.status, 400, `${name}: 400`);
    t.equal(r.json!.code, 'invalid_field', `${name}: code`);
    t.equal(r.json!.field, field, `${name}: names ${field}`);
  }
  const get = await http('GET', subjectPath('nobody'));
  t.same([get.status, get.json!.field], [400, 'subject']);
  const shown = await http('GET', subjectPath('user:not-there'));
  t.equal(shown.json!.instance, '/internal/subjects/{subject}/quota', 'the path is shown as its pattern, never the subject');
});

t.test('the list: stable subject order, kind and prefix filters, opaque cursor, limit', async (t) => {
  for (const s of ['user:a1', 'user:a2', 'user:a3', 'user:b1', 'tenant:a1', 'plan:free']) {
    t.equal((await http('PUT', subjectPath(s), own)).status, 201, `put ${s}`);
  }
  const all = await http('GET', '/internal/quotas');
  const ids = (all.json!.quotas as { subject_id: string }[]).map((q) => q.subject_id);
  t.same(ids, [...ids].sort(), 'bytewise subject order');
  t.equal(all.json!.next_cursor, null, 'one page: no cursor');
  t.ok(ids.includes(KEY) && ids.includes('tenant:acme/eu'));

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const q: string = `/internal/quotas?subject_kind=user&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = await http('GET', q);
    t.equal(page.status, 200);
    seen.push(...(page.json!.quotas as { subject_id: string }[]).map((x) => x.subject_id));
    cursor = page.json!.next_cursor as string | null;
    pages++;
  } while (cursor !== null && pages < 10);
  t.same(seen, ['user:a1', 'user:a2', 'user:a3', 'user:b1'], 'every user, once, in order');
  t.equal(pages, 2, 'four users in pages of two');

  const prefixed = await http('GET', '/internal/quotas?prefix=user%3Aa');
  t.same(
    (prefixed.json!.quotas as { subject_id: string }[]).map((x) => x.subject_id),
    ['user:a1', 'user:a2', 'user:a3'],
  );
  const both = await http('GET', '/internal/quotas?subject_kind=tenant&prefix=tenant:a');
  t.same(
    (both.json!.quotas as { subject_id: string }[]).map((x) => x.subject_id),
    ['tenant:a1', 'tenant:acme/eu'],
  );
  const partial = await http('GET', '/internal/quotas?subject_kind=plan&prefix=pl');
  t.same(
    (partial.json!.quotas as { subject_id: string }[]).map((x) => x.subject_id),
    ['plan:free'],
    'a prefix of the kind itself lists the kind',
  );
  const keys = await http('GET', '/internal/quotas?subject_kind=key');
  t.same(
    (keys.json!.quotas as { subject_id: string }[]).map((x) => x.subject_id),
    [KEY],
  );
  const none = await http('GET', '/internal/quotas?prefix=user%3Azzz');
  t.same([none.json!.quotas, none.json!.next_cursor], [[], null], 'no match: an empty page');

  const bad: [string, string][] = [
    ['subject_kind=ip', 'subject_kind'],
    ['subject_kind=user&prefix=tenant:', 'prefix'],
    ['prefix=has%20space', 'prefix'],
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['limit=x', 'limit'],
    ['cursor=not-ours', 'cursor'],
    ['subjectkind=user', 'subjectkind'],
  ];
  for (const [q, field] of bad) {
    const r = await http('GET', `/internal/quotas?${q}`);
    t.same([r.status, r.json!.code, r.json!.field], [400, 'invalid_field', field], `${q}: names ${field}`);
  }
});

t.test('sidecars: listed with their acked version; a PUT reports who acked and who lags', async (t) => {
  const sync = syncClient(t, cp.grpc);
  const acking = new TestWatcher(sync, 'sidecar-acking');
  const silent = new TestWatcher(sync, 'sidecar-silent', { ack: false });
  t.teardown(() => {
    acking.close();
    silent.close();
  });
  await acking.until((w) => w.received.length > 0);
  await silent.until((w) => w.received.length > 0);
  const listed = await waitFor(async () => {
    const r = await http('GET', '/internal/sidecars');
    const ids = (r.json!.sidecars as { sidecar_id: string }[]).map((s) => s.sidecar_id);
    return ids.includes('sidecar-acking') && ids.includes('sidecar-silent') ? r : undefined;
  });
  t.equal(listed.status, 200);

  const put = await http('PUT', subjectPath('user:watched'), own);
  t.same(put.json!.acked_sidecar_ids, ['sidecar-acking']);
  t.same(put.json!.lagging_sidecar_ids, ['sidecar-silent']);
  const after = await http('GET', '/internal/sidecars');
  t.equal(after.json!.version, put.json!.version, 'the table version');
  const rows = Object.fromEntries((after.json!.sidecars as { sidecar_id: string }[]).map((s) => [s.sidecar_id, s]));
  t.same(rows['sidecar-acking'], { sidecar_id: 'sidecar-acking', acked_version: put.json!.version, local: true, lagging: false });
  t.same(rows['sidecar-silent'], { sidecar_id: 'sidecar-silent', acked_version: 0, local: true, lagging: true });
});

t.test('auth on the new routes: 401 without a token, 403 without role admin, 200 with an admin access token', async (t) => {
  for (const path of ['/internal/quotas', '/internal/sidecars', subjectPath('user:a1')]) {
    t.equal((await http('GET', path, undefined, null)).status, 401, `${path}: no token`);
    t.equal((await http('GET', path, undefined, `Bearer ${token('customer')}`)).status, 403, `${path}: customer`);
    t.equal((await http('GET', path, undefined, `Bearer ${token('admin')}`)).status, 200, `${path}: admin`);
  }
});
