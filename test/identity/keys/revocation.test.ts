/**
 * Emergency revocation of a signing key (README, "Revoking a signing key"): the plan as a pure
 * function, then on a
 * real server and database through the operator endpoint: the key leaves the JWKS (with a new
 * ETag) and identity's own verifier at once, a successor signs immediately, the private key is
 * wiped, and another replica drops the key on the NOTIFY, or by polling alone. Plus the JWKS
 * endpoint's ETag and If-None-Match handling.
 */
import t from 'tap';
import { KeyRing } from '../../../identity/keys/key-ring.js';
import { planRevocation, type KeyRecord, type RotationPolicy } from '../../../identity/keys/key-schedule.js';
import { keyStates } from '../../../identity/keys/admin-endpoint.js';
import { watchSigningKeys } from '../../../identity/keys/key-watch.js';
import { ifNoneMatchHits } from '../../../identity/oauth/discovery.js';
import { rotationPolicy } from '../../../identity/oauth/settings.js';
import { createLogger } from '../../../shared/log.js';
import { waitFor } from '../../harness/wait.js';
import { ADMIN_TOKEN, basic, decodeJwt, postForm, startOAuthServer, type OAuthServer } from '../oauth/helpers.js';

const MIN = 60_000;
const DAY = 86_400_000;
const POLICY: RotationPolicy = { alg: 'ES256', rotationIntervalMs: 30 * DAY, jwksMaxAgeMs: 15 * MIN, retireAfterMs: 61 * MIN };
const key = (kid: string, createdAt: number, activateAt: number, retireAt?: number): KeyRecord => ({
  kid,
  alg: 'ES256',
  createdAt,
  activateAt,
  retireAt,
});
const quiet = createLogger({ service: 'identity', level: 'silent' });

t.test('planRevocation: who signs after the revoked key', async (t) => {
  const old = key('old', 0, 0, 31 * DAY + 76 * MIN); // superseded, still verifying
  const cur = key('cur', 30 * DAY, 30 * DAY + 15 * MIN);
  const now = 40 * DAY;
  t.same(planRevocation([old, cur], 'nope', now, POLICY), undefined, 'an unknown kid: nothing to do');
  t.same(
    planRevocation([old, cur], 'cur', now, POLICY),
    [
      { type: 'revoke', kid: 'cur' },
      { type: 'create', alg: 'ES256', activateAt: now },
    ],
    'the signing key: a new key signs at once, never the superseded one',
  );
  const pending = key('next', now - MIN, now + 14 * MIN);
  t.same(
    planRevocation([cur, pending], 'cur', now, POLICY),
    [
      { type: 'revoke', kid: 'cur' },
      { type: 'activate', kid: 'next', activateAt: now },
    ],
    'a published pending key is promoted: verifiers already have it',
  );
  t.same(
    planRevocation([cur, pending], 'cur', now, { ...POLICY, alg: 'RS256' }),
    [
      { type: 'revoke', kid: 'cur' },
      { type: 'create', alg: 'RS256', activateAt: now },
    ],
    'not when it is of an algorithm the policy has left',
  );
  t.same(planRevocation([cur, pending], 'next', now, POLICY), [{ type: 'revoke', kid: 'next' }], 'a pending key: only removed');
  t.same(planRevocation([old, cur], 'old', now, POLICY), [{ type: 'revoke', kid: 'old' }], 'a superseded key: only removed');
});

t.test('keyStates', async (t) => {
  const states = keyStates(
    [
      { ...key('gone', 0, 0, 10), revokedAt: undefined, revokedReason: undefined },
      { ...key('old', 0, 5, 1000), revokedAt: undefined, revokedReason: undefined },
      { ...key('cur', 0, 50), revokedAt: undefined, revokedReason: undefined },
      { ...key('next', 90, 200), revokedAt: undefined, revokedReason: undefined },
      { ...key('bad', 0, 60), revokedAt: 99, revokedReason: 'leaked' },
    ],
    100,
  );
  t.same(Object.fromEntries(states), { gone: 'retired', old: 'verifying', cur: 'signing', next: 'pending', bad: 'revoked' });
});

async function ccToken(srv: OAuthServer, secret: string): Promise<string> {
  const r = await postForm(`${srv.issuer}/token`, { grant_type: 'client_credentials' }, { authorization: basic('svc', secret) });
  if (r.status !== 200) throw new Error(`token endpoint answered ${r.status}`);
  return r.json.access_token as string;
}

async function jwks(
  srv: OAuthServer,
  headers: Record<string, string> = {},
): Promise<{ status: number; etag: string; kids: string[]; body: string }> {
  const r = await fetch(`${srv.issuer}/.well-known/jwks.json`, { headers });
  const body = await r.text();
  return {
    status: r.status,
    etag: r.headers.get('etag') ?? '',
    kids: r.status === 200 ? (JSON.parse(body) as { keys: { kid: string }[] }).keys.map((k) => k.kid) : [],
    body,
  };
}

const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };

interface RevokeReply {
  kid: string;
  revoked_at: string;
  already_revoked: boolean;
  successor: { kid: string; how: 'promoted' | 'created' } | null;
}

async function revoke(
  srv: OAuthServer,
  kid: string,
  body?: unknown,
  headers: Record<string, string> = admin,
): Promise<{ status: number; json: RevokeReply }> {
  const r = await fetch(`${srv.issuer}/auth/admin/keys/${encodeURIComponent(kid)}/revoke`, {
    method: 'POST',
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as RevokeReply };
}

t.test('the JWKS carries a strong ETag and answers If-None-Match with 304 and no body', async (t) => {
  const srv = await startOAuthServer(t, 'keys_etag');
  const first = await jwks(srv);
  t.equal(first.status, 200);
  t.match(first.etag, /^"[A-Za-z0-9_-]{43}"$/, 'a strong ETag: the quoted SHA-256 of the body');
  t.equal((await jwks(srv)).etag, first.etag, 'stable while the set is');
  for (const inm of [first.etag, `W/${first.etag}`, `"other", ${first.etag}`, '*']) {
    const r = await jwks(srv, { 'if-none-match': inm });
    t.equal(r.status, 304, `If-None-Match: ${inm}`);
    t.equal(r.body, '', 'no body');
    t.equal(r.etag, first.etag, 'the ETag is repeated');
  }
  t.equal((await jwks(srv, { 'if-none-match': '"stale"' })).status, 200, 'another tag: the document');
  t.ok(ifNoneMatchHits(' "a" , W/"b"', '"b"'));
  t.notOk(ifNoneMatchHits(undefined, '"b"'));
  t.notOk(ifNoneMatchHits('"bb"', '"b"'));
});

t.test('revoking the signing key through the admin endpoint', async (t) => {
  const srv = await startOAuthServer(t, 'keys_revoke');
  const { clientSecret } = await srv.confidentialClient('svc', { scope: 'read:orders' });
  const before = await jwks(srv);
  const token = await ccToken(srv, clientSecret);
  const k = decodeJwt(token).header.kid as string;
  t.same(before.kids, [k]);
  const local = srv.running.runtime.verifier;
  t.equal((await local.verify(token)).claims.sub, 'svc', "identity's own verifier accepts the token");

  t.equal((await revoke(srv, k, undefined, {})).status, 401, 'no credentials: 401');
  t.equal((await revoke(srv, k, undefined, { authorization: `Bearer ${token}` })).status, 403, 'a service token: 403');
  t.equal((await revoke(srv, k, { reason: 7 })).status, 400, 'a reason that is not a string: 400');

  const r = await revoke(srv, k, { reason: 'key leaked in a CI log' });
  t.equal(r.status, 200);
  t.match(r.json, { kid: k, already_revoked: false, successor: { how: 'created' } });
  const successor = r.json.successor!.kid;
  t.not(successor, k);

  const after = await jwks(srv);
  t.same(after.kids, [successor], 'the revoked key left the JWKS before the answer; the successor is in it');
  t.not(after.etag, before.etag, 'with a new ETag, so a conditional refresh gets the new set');
  t.equal((await jwks(srv, { 'if-none-match': before.etag })).status, 200, 'the old ETag no longer matches');
  await t.rejects(local.verify(token), { name: 'TokenError', reason: 'kid_unknown' }, "identity's own verifier refuses it");
  const fresh = await ccToken(srv, clientSecret);
  t.equal(decodeJwt(fresh).header.kid, successor, 'the successor signs at once');
  t.equal((await local.verify(fresh)).claims.sub, 'svc');

  const { rows } = await srv.pool.query<{ private_pkcs8: string | null; revoked_reason: string; revoked_at: Date }>(
    'SELECT private_pkcs8, revoked_reason, revoked_at FROM signing_keys WHERE kid = $1',
    [k],
  );
  t.equal(rows[0]!.private_pkcs8, null, 'the private key is wiped');
  t.equal(rows[0]!.revoked_reason, 'key leaked in a CI log');
  t.equal(rows[0]!.revoked_at.toISOString(), r.json.revoked_at);

  const again = await revoke(srv, k);
  t.equal(again.status, 200, 'idempotent');
  t.match(again.json, { kid: k, already_revoked: true, successor: null, revoked_at: r.json.revoked_at });
  t.equal((await revoke(srv, 'no-such-kid')).status, 404);

  const list = await fetch(`${srv.issuer}/auth/admin/keys`, { headers: admin });
  const listed = ((await list.json()) as { keys: { kid: string; state: string; revoked_reason: string | null }[] }).keys;
  t.same(
    listed.map((x) => [x.kid, x.state, x.revoked_reason]),
    [
      [k, 'revoked', 'key leaked in a CI log'],
      [successor, 'signing', null],
    ],
  );
  t.notOk(JSON.stringify(listed).includes('PRIVATE'), 'no key material');

  // The schedule goes on without it: a rotation step much later neither resurrects nor deletes it.
  srv.clock.advance(31 * DAY);
  await srv.running.tick();
  t.notOk((await jwks(srv)).kids.includes(k), 'still not published after a rotation step');
  t.ok(srv.logText().includes('signing keys: key revoked'), 'the revocation is logged');
});

t.test('revoking the signing key while a successor is pending promotes it', async (t) => {
  const srv = await startOAuthServer(t, 'keys_promote');
  const [k] = (await jwks(srv)).kids;
  srv.clock.advance(30 * DAY);
  await srv.running.tick();
  const p = (await jwks(srv)).kids.find((x) => x !== k)!;
  t.ok(p, 'a successor is published, not yet signing');
  t.equal(srv.running.runtime.keys.signingKey().kid, k);
  const r = await revoke(srv, k!);
  t.match(r.json, { successor: { kid: p, how: 'promoted' } });
  t.equal(srv.running.runtime.keys.signingKey().kid, p, 'the published successor signs at once');
  t.same((await jwks(srv)).kids, [p]);
});

t.test('another replica drops the revoked key on the NOTIFY, and by polling alone', async (t) => {
  const srv = await startOAuthServer(t, 'keys_replicas');
  const policy = rotationPolicy(srv.deps.settings);
  // Replica B hears the NOTIFY (its poll is an hour: only the notification can be what reloads it).
  const b = new KeyRing(srv.pool, policy, srv.clock);
  await b.ensureReady();
  const bWatch = await watchSigningKeys({ ring: b, databaseUrl: srv.db.url, pollMs: 3_600_000, log: quiet });
  t.teardown(() => bWatch.close());
  // Replica C has no LISTEN connection: it polls every 50 ms.
  const c = new KeyRing(srv.pool, policy, srv.clock);
  await c.ensureReady();
  const cWatch = await watchSigningKeys({ ring: c, pollMs: 50, log: quiet });
  t.teardown(() => cWatch.close());

  const k = srv.running.runtime.keys.signingKey().kid;
  t.equal(b.signingKey().kid, k);
  t.ok(b.jwks().keys.some((x) => x.kid === k));
  // B's LISTEN connection is up once its catch-up reload on connect has run: wait for it, so the
  // NOTIFY below cannot be sent before B listens.
  await waitFor(
    async () => (await srv.pool.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'identity:keys'")).rowCount === 1,
    { what: "replica B's LISTEN connection" },
  );

  const r = await revoke(srv, k);
  const successor = r.json.successor!.kid;
  const started = performance.now();
  await waitFor(() => !b.jwks().keys.some((x) => x.kid === k), { what: 'replica B to drop the key on the NOTIFY' });
  t.equal(b.signingKey().kid, successor, 'B signs with the successor');
  t.comment(`replica B (NOTIFY) dropped the key ${(performance.now() - started).toFixed(0)} ms after the revocation answered`);
  await waitFor(() => !c.jwks().keys.some((x) => x.kid === k), { what: 'replica C to drop the key by polling' });
  t.equal(c.signingKey().kid, successor, 'C signs with the successor');
});
