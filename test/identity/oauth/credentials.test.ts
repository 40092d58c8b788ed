/**
 * Sign-in credentials against real PostgreSQL: argon2id with the OWASP parameters, normalised
 * emails, one undefined answer for a wrong password and an unknown email; and the purge of expired
 * codes and tokens.
 */
import t from 'tap';
import { migrate } from '../../../shared/migrate.js';
import { migrationsDir } from '../../../shared/paths.js';
import { credentialProfile, setCredentials, verifyPassword } from '../../../identity/oauth/credentials.js';
import { createCode } from '../../../identity/oauth/code-store.js';
import { purgeExpired } from '../../../identity/oauth/purge.js';
import { createGrant } from '../../../identity/tokens/grant-store.js';
import { useTestDatabase } from '../../harness/db.js';

t.test('credentials', async (t) => {
  const db = await useTestDatabase(t, 'oauth_credentials');
  await migrate(db.pool, { service: 'identity', dir: migrationsDir('identity') });
  await setCredentials(db.pool, {
    userId: 'u1',
    email: '  Alice@Example.COM ',
    password: 'correct horse battery staple',
    role: 'support',
    name: 'Alice',
  });

  const { rows } = await db.pool.query<{ email: string; password_hash: string }>('SELECT email, password_hash FROM credentials');
  t.equal(rows[0]!.email, 'alice@example.com', 'stored in normal form');
  t.match(rows[0]!.password_hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/, 'argon2id, 19 MiB, 2 passes, parallelism 1 (OWASP)');
  t.notOk(rows[0]!.password_hash.includes('correct horse'), 'never the password');

  t.equal(await verifyPassword(db.pool, 'ALICE@example.com', 'correct horse battery staple'), 'u1');
  t.equal(await verifyPassword(db.pool, 'alice@example.com', 'correct horse battery stapler'), undefined, 'wrong password');
  t.equal(await verifyPassword(db.pool, 'bob@example.com', 'correct horse battery staple'), undefined, 'unknown email: the same answer');
  t.equal(await verifyPassword(db.pool, 'alice@example.com', ''), undefined);
  t.equal(await verifyPassword(db.pool, 'alice@example.com', 'x'.repeat(2000)), undefined, 'an oversized password is refused unhashed');
  t.same(await credentialProfile(db.pool, 'u1'), { role: 'support', email: 'alice@example.com', name: 'Alice' });

  await t.rejects(setCredentials(db.pool, { userId: 'u2', email: 'b@example.com', password: 'short' }), {
    code: 'invalid_field',
    field: 'password',
  });

  // A corrupt stored hash is a failed sign-in, not a crash.
  await db.pool.query(`UPDATE credentials SET password_hash = 'not-a-hash' WHERE user_id = 'u1'`);
  t.equal(await verifyPassword(db.pool, 'alice@example.com', 'correct horse battery staple'), undefined);
});

t.test('purgeExpired deletes what can no longer be used, and keeps what can', async (t) => {
  const db = await useTestDatabase(t, 'oauth_purge');
  await migrate(db.pool, { service: 'identity', dir: migrationsDir('identity') });
  const now = Date.UTC(2030, 0, 1);
  const day = 86_400_000;
  const code = {
    clientId: 'c',
    redirectUri: 'https://a/cb',
    codeChallenge: 'x'.repeat(43),
    userId: 'u',
    scope: '',
    nonce: undefined,
    authTimeMs: now,
    ttlMs: 60_000,
  };
  await createCode(db.pool, { ...code, nowMs: now - 2 * day });
  await createCode(db.pool, { ...code, nowMs: now - 1000 });
  const old = await createGrant(db.pool, {
    userId: 'u',
    clientId: 'c',
    scope: '',
    authTimeMs: now - 30 * day,
    nowMs: now - 30 * day,
    refreshTtlMs: 14 * day,
  });
  const fresh = await createGrant(db.pool, { userId: 'u', clientId: 'c', scope: '', authTimeMs: now, nowMs: now, refreshTtlMs: 14 * day });
  const r = await purgeExpired(db.pool, now, { refreshGraceMs: 30_000, accessTokenTtlMs: 900_000, clockSkewSec: 60 });
  t.same(r, { codes: 1, deviceCodes: 0, refreshTokens: 1, grants: 1, revokedTokens: 0 });
  const { rows } = await db.pool.query<{ grant_id: string }>('SELECT grant_id FROM oauth_grants');
  t.same(
    rows.map((x) => x.grant_id),
    [fresh.grant.grantId],
  );
  t.not(old.grant.grantId, fresh.grant.grantId);
});
