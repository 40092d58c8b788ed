import t from 'tap';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { startTestIdentity, AUDIENCE } from './helpers.js';

const PASSWORD = 'correct horse battery staple';
const SECRET = 'accounts-test-service-secret';
const id = await startTestIdentity(t, 'identity_accounts', {
  IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT: '3',
  IDENTITY_LOGIN_MAX_FAILURES_PER_IP: '6',
  IDENTITY_LOGIN_FAILURE_WINDOW: '15m',
  SERVICE_SECRET: SECRET,
});
/** Requests that look as if the sidecar forwarded them from `ip`. */
const from = (ip: string): Record<string, string> => ({ 'x-subject-secret': SECRET, 'x-subject-address': ip });
const login = (email: string, password: string, ip: string) =>
  id.call('POST', '/auth/login', { body: { email, password }, headers: from(ip) });

t.test('signup registers the user and its credentials in one go; login issues a 1 h access token', async (t) => {
  const r = await id.call('POST', '/auth/signup', { body: { email: 'Alice@Example.com', password: PASSWORD, name: 'Alice' } });
  t.equal(r.status, 201);
  const userId = String(r.json?.user_id);
  t.match(userId, /^[0-9a-f-]{36}$/);
  const events = await id.pool.query<{ event_type: string }>('SELECT event_type FROM events WHERE stream_id = $1', [`user-${userId}`]);
  t.same(
    events.rows.map((e) => e.event_type),
    ['UserRegistered'],
  );
  const creds = await id.pool.query<{ email: string; role: string; password_hash: string }>(
    'SELECT email, role, password_hash FROM credentials WHERE user_id = $1',
    [userId],
  );
  t.match(creds.rows[0], { email: 'alice@example.com', role: 'customer', password_hash: /^\$argon2id\$/ });

  const ok = await login('alice@example.com', PASSWORD, '10.0.0.1');
  t.equal(ok.status, 200);
  t.same(Object.keys(ok.json!).sort(), ['access_token', 'expires_in', 'token_type']);
  t.match(ok.json, { token_type: 'Bearer', expires_in: 3600 });
  t.equal(ok.headers.get('cache-control'), 'no-store');
  const token = String(ok.json?.access_token);
  t.match(decodeProtectedHeader(token), { typ: 'at+jwt', alg: 'ES256' });
  const claims = decodeJwt(token);
  t.match(claims, { sub: userId, user_id: userId, role: 'customer', aud: AUDIENCE, iss: id.issuer });
  t.equal(claims.exp! - claims.iat!, 3600);
  // identity's own resource endpoints accept it
  const mine = await id.call('GET', '/orders', { token });
  t.equal(mine.status, 200);
  t.same(mine.json, []);
});

t.test('a duplicate email is 409 email_taken, whatever its case, and leaves nothing behind', async (t) => {
  const count = async () => Number((await id.pool.query<{ n: string }>('SELECT count(*) AS n FROM credentials')).rows[0]!.n);
  const before = await count();
  const r = await id.call('POST', '/auth/signup', { body: { email: ' ALICE@example.com', password: PASSWORD, name: 'Other' } });
  t.equal(r.status, 409);
  t.equal(r.json?.code, 'email_taken');
  t.notOk(r.text.includes('alice'), 'the address is not echoed');
  t.equal(await count(), before);
});

t.test('credentials already held by an address without a user: email_taken, and no user is registered', async (t) => {
  await id.pool.query(`INSERT INTO credentials (user_id, email, password_hash) VALUES ('seeded', 'seeded@example.com', 'x')`);
  const events = async () => Number((await id.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
  const before = await events();
  const r = await id.call('POST', '/auth/signup', { body: { email: 'seeded@example.com', password: PASSWORD, name: 'S' } });
  t.equal(r.status, 409);
  t.equal(r.json?.code, 'email_taken');
  t.equal(await events(), before, 'the UserRegistered was rolled back with the credentials');
  const reserved = await id.pool.query('SELECT 1 FROM email_reservations WHERE email = $1', ['seeded@example.com']);
  t.equal(reserved.rowCount, 0, 'the reservation was rolled back too');
});

t.test('bad signups are 400 naming the field; the password policy is 12 to 256 characters', async (t) => {
  const cases: [Record<string, unknown>, string][] = [
    [{ email: 'b@example.com', password: 'short pass1', name: 'B' }, 'password'],
    [{ email: 'b@example.com', password: 'x'.repeat(257), name: 'B' }, 'password'],
    [{ email: 'b@example.com', password: 12345678901234, name: 'B' }, 'password'],
    [{ email: 'b@example.com', password: PASSWORD }, 'name'],
    [{ password: PASSWORD, name: 'B' }, 'email'],
    [{ email: 'not an email', password: PASSWORD, name: 'B' }, 'email'],
    [{ email: 'b@example.com', password: PASSWORD, name: 'B', role: 'admin' }, 'role'],
  ];
  for (const [body, field] of cases) {
    const r = await id.call('POST', '/auth/signup', { body });
    t.equal(r.status, 400, `${field}: 400`);
    t.equal(r.json?.field, field, `names ${field}`);
    t.notOk(r.text.includes(PASSWORD), 'never echoes the password');
  }
  t.equal((await id.call('POST', '/auth/signup', { body: { email: 'b@example.com', password: 'é'.repeat(12), name: 'B' } })).status, 201);
  t.equal((await id.call('POST', '/auth/signup', { body: { email: 'c@example.com', password: 'x'.repeat(256), name: 'C' } })).status, 201);
});

t.test('failed logins: one generic 401 whatever the cause', async (t) => {
  const unknown = await login('nobody@example.com', PASSWORD, '10.0.1.1');
  const wrong = await login('alice@example.com', 'wrong password!!', '10.0.1.2');
  const empty = await login('alice@example.com', '', '10.0.1.3');
  for (const r of [unknown, wrong, empty]) {
    t.equal(r.status, 401);
    t.equal(r.json?.code, 'invalid_credentials');
  }
  t.equal(unknown.text, wrong.text, 'the same body for an unknown email and a wrong password');
  t.equal(wrong.text, empty.text);
  await id.pool.query('DELETE FROM login_failures');
});

/**
 * The seconds left of a window opened at the first failure: the test's clock is real time plus
 * what the test advances (OffsetClock), so a loaded machine may have spent a few of them already.
 */
function retryAfterWithin(t: { ok(v: boolean, msg: string): void }, header: string | null | undefined, max: number): void {
  const s = Number(header);
  t.ok(Number.isInteger(s) && s <= max && s > max - 30, `Retry-After ${header} is at most ${max} s and no more than a few seconds under`);
}

t.test('throttling per account: the 4th attempt within the window is 429, even with the right password', async (t) => {
  for (let i = 0; i < 3; i++) t.equal((await login('alice@example.com', `wrong password ${i}`, `10.0.2.${i}`)).status, 401);
  const blocked = await login('alice@example.com', PASSWORD, '10.0.2.9');
  t.equal(blocked.status, 429);
  t.equal(blocked.json?.code, 'login_throttled');
  retryAfterWithin(t, blocked.headers.get('retry-after'), 900);
  // an unknown account is throttled the same way (no existence oracle)
  for (let i = 0; i < 3; i++) await login('ghost@example.com', 'wrong password', `10.0.3.${i}`);
  const ghost = await login('ghost@example.com', 'wrong password', '10.0.3.9');
  t.equal(ghost.status, 429);
  retryAfterWithin(t, ghost.headers.get('retry-after'), 900);
  // another account is not affected
  t.equal((await login('b@example.com', 'é'.repeat(12), '10.0.2.10')).status, 200);

  id.clock.advance(10 * 60_000);
  retryAfterWithin(t, (await login('alice@example.com', PASSWORD, '10.0.2.11')).headers.get('retry-after'), 300);
  id.clock.advance(5 * 60_000);
  const after = await login('alice@example.com', PASSWORD, '10.0.2.12');
  t.equal(after.status, 200, 'the window has closed');
  const rows = await id.pool.query(`SELECT 1 FROM login_failures WHERE scope = 'account'`);
  t.equal(rows.rowCount, 1, "a success clears the account's count (ghost's is left)");
  await id.pool.query('DELETE FROM login_failures');
});

t.test('throttling per client address, trusted from X-Subject-Address only with the service secret', async (t) => {
  for (let i = 0; i < 6; i++) t.equal((await login(`user${i}@example.com`, 'wrong password', '192.0.2.7')).status, 401);
  const blocked = await login('alice@example.com', PASSWORD, '192.0.2.7');
  t.equal(blocked.status, 429);
  t.equal(blocked.json?.code, 'login_throttled');
  t.ok(Number(blocked.headers.get('retry-after')) > 0);
  t.equal((await login('alice@example.com', PASSWORD, '192.0.2.8')).status, 200, 'another address is not affected');
  // Without the secret, X-Subject-Address is the client's own word and is ignored: the peer address counts.
  const spoofed = await id.call('POST', '/auth/login', {
    body: { email: 'alice@example.com', password: PASSWORD },
    headers: { 'x-subject-address': '192.0.2.7', 'x-subject-secret': 'guess' },
  });
  t.equal(spoofed.status, 200);
  // X-Forwarded-For is never the client address, not even with the secret.
  const chain = await id.call('POST', '/auth/login', {
    body: { email: 'alice@example.com', password: PASSWORD },
    headers: { 'x-forwarded-for': '192.0.2.7', 'x-subject-secret': SECRET },
  });
  t.equal(chain.status, 200);
  const peer = await id.pool.query<{ key: string }>(`SELECT key FROM login_failures WHERE scope = 'ip'`);
  t.same(
    peer.rows.map((r) => r.key),
    ['192.0.2.7'],
  );
  const metrics = await id.call('GET', '/metrics');
  t.match(metrics.text, /identity_login_attempts_total\{[^}]*outcome="throttled"[^}]*\} [1-9]/);
});

t.test('no password, hash or token in any log line', async (t) => {
  t.ok(id.lines.length > 0);
  for (const line of id.lines) {
    t.notOk(line.includes(PASSWORD) || line.includes('$argon2id$') || /eyJ[\w-]+\.eyJ/.test(line), 'clean line');
  }
});
