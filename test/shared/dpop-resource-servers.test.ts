// @tier: pure
/**
 * Every resource server refuses a DPoP-bound access token (`cnf.jkt`) presented as Bearer, because
 * they all verify through shared/jwt: the control plane's admin API (limiter/control-plane/auth.ts)
 * and the notifier's callers (notifier/caller.ts), here with a static key set; the sidecar and
 * identity's /userinfo have their own end-to-end tests (test/limiter/dpop.test.ts,
 * test/identity/oauth/dpop.test.ts). The same tokens without `cnf` are accepted, so the refusal is
 * the binding's.
 */
import t from 'tap';
import { Authenticator } from '../../limiter/control-plane/auth.js';
import { createCallerResolver } from '../../notifier/caller.js';
import { createVerifier } from '../../shared/jwt/index.js';
import { accessClaims, generateTestKey, jwksOf, sign, TEST_AUDIENCE, TEST_ISSUER } from '../harness/tokens.js';

const key = await generateTestKey('ES256');
const verifier = (): ReturnType<typeof createVerifier> =>
  createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: jwksOf(key) });
const JKT = 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs';
const now = Date.now();
const bound = sign(accessClaims({ nowMs: now }, { role: 'admin', cnf: { jkt: JKT } }), { key });
const plain = sign(accessClaims({ nowMs: now }, { role: 'admin' }), { key });

t.test('control plane admin API', async (t) => {
  const auth = new Authenticator({ adminToken: undefined, syncToken: undefined, verifier });
  t.teardown(() => auth.close());
  t.match(await auth.admin(`Bearer ${plain}`), { kind: 'access_token', sub: 'user-1' }, 'an unbound admin token is accepted');
  await t.rejects(auth.admin(`Bearer ${bound}`), { name: 'TokenError', reason: 'dpop_bound_as_bearer', code: 'invalid_token' });
});

t.test('notifier callers', async (t) => {
  const callers = createCallerResolver({ serviceSecret: undefined, verifier });
  t.teardown(() => callers.close());
  t.match(await callers.callerOf({ headers: { authorization: `Bearer ${plain}` } }), { subject: 'user:user-1', via: 'token' });
  await t.rejects(callers.callerOf({ headers: { authorization: `Bearer ${bound}` } }), {
    name: 'TokenError',
    reason: 'dpop_bound_as_bearer',
    code: 'invalid_token',
  });
});

t.test('notifier callers behind the sidecar: a tenant token under the DPoP scheme names its user', async (t) => {
  // The sidecar verified the proof and the binding before vouching with the shared secret
  // (test/limiter/dpop.test.ts); the notifier reads the token only for its user.
  const secret = 'shared-secret-for-the-sidecar-0123';
  const callers = createCallerResolver({ serviceSecret: secret, verifier });
  t.teardown(() => callers.close());
  const vouched = { 'x-subject': 'tenant:acme', 'x-subject-role': 'service', 'x-subject-secret': secret };
  t.match(await callers.callerOf({ headers: { ...vouched, authorization: `DPoP ${bound}` } }), {
    subject: 'tenant:acme',
    userId: 'user-1',
    via: 'sidecar',
  });
  t.match(await callers.callerOf({ headers: { ...vouched, authorization: `Bearer ${plain}` } }), { userId: 'user-1' });
  await t.rejects(
    callers.callerOf({ headers: { authorization: `DPoP ${bound}` } }),
    { code: 'invalid_token' },
    'not vouched for: the DPoP scheme is not accepted without the proof check',
  );
});
