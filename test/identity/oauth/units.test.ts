// @tier: pure
/**
 * The pure pieces of the authorization server: scopes, PKCE, parameter parsing, client
 * registration rules (redirect URIs above all), client authentication parsing, token claims.
 */
import t from 'tap';
import { presentedClient, authenticateClient } from '../../../identity/clients/client-auth.js';
import { clientSecretMatches, generateClientSecret, hashClientSecret } from '../../../identity/clients/client-secret.js';
import { redirectUriProblem, validateRegistration, type OAuthClient } from '../../../identity/clients/client.js';
import { OAuthError } from '../../../identity/oauth/oauth-error.js';
import { parseParams } from '../../../identity/oauth/params.js';
import { isValidCodeVerifier, s256, verifierMatches } from '../../../identity/oauth/pkce.js';
import { accessTokenScope, grantScopes, isApiScope, parseScope } from '../../../identity/oauth/scopes.js';
import { redirectTo } from '../../../identity/oauth/authorization-request.js';
import { accessTokenClaims, idTokenClaims } from '../../../identity/tokens/claims.js';
import { hmacPads, newOpaqueToken, refreshTokenBytes, sha256Bytes, successorOf } from '../../../identity/tokens/opaque.js';
import { PlatformError } from '../../../shared/errors.js';

t.test('PKCE S256: the RFC 7636 appendix B example, and verifier rules', async (t) => {
  t.equal(s256('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'), 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
  t.ok(verifierMatches('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'));
  t.notOk(verifierMatches('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'));
  t.ok(isValidCodeVerifier('a'.repeat(43)));
  t.ok(isValidCodeVerifier('a'.repeat(128)));
  t.notOk(isValidCodeVerifier('a'.repeat(42)), '42 characters is too short');
  t.notOk(isValidCodeVerifier('a'.repeat(129)), '129 is too long');
  t.notOk(isValidCodeVerifier(`${'a'.repeat(42)}+`), '+ is not in the alphabet');
  t.notOk(verifierMatches('a'.repeat(42), s256('a'.repeat(42))), 'a short verifier never matches, even hashed right');
});

t.test('scopes: <action>:<resource> or OpenID scopes; requests must be allowed', async (t) => {
  t.same(parseScope('openid  read:orders openid'), ['openid', 'read:orders']);
  t.equal(parseScope(undefined), undefined);
  for (const bad of ['admin', 'READ:orders', 'read:', ':orders', 'read:orders:x', 'rea d']) {
    t.throws(() => parseScope(bad), { name: 'OAuthError', error: 'invalid_scope' }, bad);
  }
  t.ok(isApiScope('refund:order.items'));
  t.same(grantScopes(['read:orders'], ['openid', 'read:orders']), ['read:orders']);
  t.same(grantScopes(undefined, ['openid', 'read:orders']), ['openid', 'read:orders'], 'none asked: the client default');
  t.same(grantScopes(undefined, ['openid', 'read:orders'], isApiScope), ['read:orders']);
  t.throws(() => grantScopes(['write:orders'], ['read:orders']), { name: 'OAuthError', error: 'invalid_scope' });
  t.throws(
    () => grantScopes(['openid'], ['openid', 'read:orders'], isApiScope),
    { name: 'OAuthError', error: 'invalid_scope' },
    'client credentials get no OpenID scope',
  );
  t.equal(accessTokenScope(['openid', 'read:orders', 'email', 'write:orders']), 'read:orders write:orders');
});

t.test('parameters: empty means absent, a repeat is invalid_request', async (t) => {
  const p = parseParams('a=1&b=&c=x%20y');
  t.equal(p.get('a'), '1');
  t.equal(p.has('b'), false);
  t.equal(p.get('c'), 'x y');
  t.throws(() => parseParams('a=1&a=2'), { name: 'OAuthError', error: 'invalid_request' });
  t.doesNotThrow(() => parseParams('a=1&a='), 'a repeat without a value counts as omitted');
});

t.test('redirect URI registration rules', async (t) => {
  for (const ok of [
    'https://app.example/cb',
    'https://app.example/cb?x=1',
    'http://127.0.0.1:8080/cb',
    'http://localhost/cb',
    'http://[::1]:9/cb',
  ]) {
    t.equal(redirectUriProblem(ok, 'confidential'), undefined, ok);
  }
  t.equal(redirectUriProblem('com.example.app:/oauth', 'public'), undefined, 'private-use scheme for a native (public) app');
  for (const [bad, type] of [
    ['https://*.example/cb', 'public'],
    ['https://app.example/cb#frag', 'public'],
    ['http://app.example/cb', 'public'],
    ['https://user:pw@app.example/cb', 'public'],
    ['/relative', 'public'],
    ['javascript:alert(1)', 'public'],
    ['com.example.app:/oauth', 'confidential'],
    ['myapp:/cb', 'public'],
    ['https://app.example/c b', 'public'],
  ] as const) {
    t.type(redirectUriProblem(bad, type), 'string', `${bad} (${type}) is refused`);
  }
});

t.test('client registration validation', async (t) => {
  const pub = validateRegistration({ client_type: 'public', redirect_uris: ['https://a.example/cb'] });
  t.same(pub.grantTypes, ['authorization_code', 'refresh_token']);
  t.same(pub.scopes, ['openid', 'profile', 'email']);
  t.match(pub.clientId, /^[A-Za-z0-9_-]{22}$/, 'a generated client id');
  const conf = validateRegistration({ client_type: 'confidential', scope: 'read:orders' });
  t.same(conf.grantTypes, ['client_credentials']);
  t.equal(conf.role, 'service');
  const cases: [Record<string, unknown>, string][] = [
    [{ client_type: 'spa' }, 'client_type'],
    [{ client_type: 'public', grant_types: ['client_credentials'] }, 'grant_types'],
    [{ client_type: 'public', grant_types: ['implicit'], redirect_uris: ['https://a.example/cb'] }, 'grant_types'],
    [{ client_type: 'confidential', grant_types: ['password'] }, 'grant_types'],
    [{ client_type: 'public' }, 'redirect_uris'],
    [{ client_type: 'public', redirect_uris: ['https://a.example/*'] }, 'redirect_uris[0]'],
    [{ client_type: 'confidential', scope: 'everything' }, 'scope'],
    [{ client_type: 'confidential', role: 'customer' }, 'role'],
    [{ client_type: 'confidential', client_id: '../x' }, 'client_id'],
    [{ client_type: 'confidential', grant_types: ['refresh_token'] }, 'grant_types'],
  ];
  for (const [body, field] of cases) {
    let err: unknown;
    try {
      validateRegistration(body);
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof PlatformError, `${JSON.stringify(body)} is refused`);
    t.match(err, { code: 'invalid_field', field }, `${JSON.stringify(body)} → ${field}`);
  }
});

t.test('client secrets: 256 bits, compared by SHA-256 in constant time', async (t) => {
  const s = generateClientSecret();
  t.equal(Buffer.from(s, 'base64url').length, 32);
  t.ok(clientSecretMatches(s, hashClientSecret(s)));
  t.notOk(clientSecretMatches(`${s}x`, hashClientSecret(s)));
  t.not(generateClientSecret(), s);
});

t.test('client authentication parsing and checks', async (t) => {
  const b = (id: string, secret: string): string => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
  t.same(
    presentedClient({ authorization: b('my%20app', 'p%3Ass') }, new Map()),
    { method: 'client_secret_basic', clientId: 'my app', secret: 'p:ss' },
    'form-decoded (RFC 6749 §2.3.1)',
  );
  t.same(
    presentedClient(
      {},
      new Map([
        ['client_id', 'c'],
        ['client_secret', 's'],
      ]),
    ),
    { method: 'client_secret_post', clientId: 'c', secret: 's' },
  );
  t.same(presentedClient({}, new Map([['client_id', 'c']])), { method: 'none', clientId: 'c', secret: undefined });
  t.throws(() => presentedClient({ authorization: b('c', 's') }, new Map([['client_secret', 's']])), {
    name: 'OAuthError',
    error: 'invalid_request',
  });
  t.throws(() => presentedClient({ authorization: b('c', 's') }, new Map([['client_id', 'd']])), {
    name: 'OAuthError',
    error: 'invalid_request',
  });
  t.throws(() => presentedClient({ authorization: 'Basic !!!' }, new Map()), { name: 'OAuthError', error: 'invalid_client' });
  t.throws(() => presentedClient({}, new Map()), { name: 'OAuthError', error: 'invalid_client' });

  const secret = generateClientSecret();
  const conf: OAuthClient = {
    clientId: 'c',
    type: 'confidential',
    name: 'c',
    redirectUris: [],
    grantTypes: ['client_credentials'],
    scopes: [],
    role: 'service',
    tenantId: undefined,
    plan: undefined,
    secretSha256: hashClientSecret(secret),
    createdAt: 0,
  };
  const pub: OAuthClient = { ...conf, clientId: 'p', type: 'public', secretSha256: undefined };
  const lookup = async (id: string): Promise<OAuthClient | undefined> => (id === 'c' ? conf : id === 'p' ? pub : undefined);
  t.equal((await authenticateClient({ method: 'client_secret_basic', clientId: 'c', secret }, lookup)).clientId, 'c');
  const fails = async (p: Parameters<typeof authenticateClient>[0], opts = {}): Promise<void> => {
    const err = await authenticateClient(p, lookup, opts).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof OAuthError, `${p.clientId}/${p.method}: refused`);
    t.match(err, { error: 'invalid_client', status: 401, headers: { 'www-authenticate': /^Basic/ } });
  };
  await fails({ method: 'client_secret_basic', clientId: 'c', secret: 'wrong' });
  await fails({ method: 'none', clientId: 'c', secret: undefined });
  await fails({ method: 'client_secret_post', clientId: 'p', secret: 'x' });
  await fails({ method: 'none', clientId: 'ghost', secret: undefined });
  await fails({ method: 'none', clientId: 'p', secret: undefined }, { confidentialOnly: true });
  t.equal((await authenticateClient({ method: 'none', clientId: 'p', secret: undefined }, lookup)).clientId, 'p');
});

t.test('redirects append to the registered URI as registered', async (t) => {
  t.equal(
    redirectTo('https://a.example/cb', { code: 'x', state: undefined, iss: 'http://i' }),
    'https://a.example/cb?code=x&iss=http%3A%2F%2Fi',
  );
  t.equal(redirectTo('https://a.example/cb?t=1', { code: 'x' }), 'https://a.example/cb?t=1&code=x');
});

t.test('token claims: the access-token and id-token shapes', async (t) => {
  const a = accessTokenClaims({
    issuer: 'i',
    audience: 'api',
    sub: 'u',
    role: 'customer',
    scope: 's:r',
    clientId: 'c',
    jti: 'j',
    nowMs: 1_000_500,
    ttlMs: 900_000,
  });
  t.same(a, {
    iss: 'i',
    sub: 'u',
    user_id: 'u',
    role: 'customer',
    scope: 's:r',
    aud: 'api',
    exp: 1900,
    iat: 1000,
    nbf: 1000,
    jti: 'j',
    client_id: 'c',
  });
  const id = idTokenClaims({
    issuer: 'i',
    sub: 'u',
    clientId: 'c',
    authTimeMs: 900_000,
    nonce: 'n',
    sid: 'g',
    profile: { role: 'admin', email: 'a@b.c', name: 'A' },
    scopes: ['openid', 'email'],
    nowMs: 1_000_000,
    ttlMs: 600_000,
  });
  t.same(id, {
    iss: 'i',
    sub: 'u',
    aud: 'c',
    exp: 1600,
    iat: 1000,
    auth_time: 900,
    user_id: 'u',
    role: 'admin',
    sid: 'g',
    nonce: 'n',
    email: 'a@b.c',
    email_verified: false,
  });
});

t.test('refresh-token successors: the pads compute HMAC-SHA256 as the database does', async (t) => {
  const key = Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex');
  const parent = refreshTokenBytes(newOpaqueToken())!;
  const { ipad, opad } = hmacPads(key);
  t.equal(ipad.length, 64);
  // The statement's expression: sha256(opad || sha256(ipad || parent)).
  const inSql = sha256Bytes(Buffer.concat([opad, sha256Bytes(Buffer.concat([ipad, parent]))]));
  t.same(inSql, successorOf(key, parent));
});

t.test('refresh tokens have one spelling: a non-canonical base64url form is refused', async (t) => {
  const token = newOpaqueToken();
  t.equal(refreshTokenBytes(token)!.length, 32);
  // The 43rd character carries 4 unused bits: flipping them decodes to the same bytes.
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = alphabet.indexOf(token[42]!);
  const variant = token.slice(0, 42) + alphabet[(last & 0b110000) | ((last + 1) & 0b001111)];
  t.same(Buffer.from(variant, 'base64url'), Buffer.from(token, 'base64url'), 'the variant decodes to the same bytes');
  t.equal(refreshTokenBytes(variant), undefined, 'and is refused');
  t.equal(refreshTokenBytes('short'), undefined);
});
