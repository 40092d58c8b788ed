/**
 * PostgreSQL unreachable: the OAuth endpoints answer 503 (`temporarily_unavailable` in OAuth form,
 * `dependency_unavailable` as problem+json), never a 500, and /readyz says the keys are not loaded.
 */
import t from 'tap';
import { loadConfig } from '../../../shared/config.js';
import { createPool } from '../../../shared/db.js';
import { createRegistry } from '../../../shared/metrics.js';
import { startHttpService } from '../../../shared/service.js';
import {
  createOAuthRuntime,
  oauthConfig,
  oauthSettings,
  registerOAuthRoutes,
  signingKeysCheck,
  type OAuthDeps,
} from '../../../identity/oauth/index.js';
import { testLogger } from '../../harness/log.js';
import { freePort } from '../../harness/ports.js';
import { basic, postForm } from './helpers.js';

t.test('with the database unreachable, every endpoint answers 503', async (t) => {
  const log = testLogger('identity');
  // Nothing listens on the port of a server just closed.
  const deadPort = await freePort();
  const pool = createPool(`postgres://postgres@127.0.0.1:${deadPort}/nothing`, { applicationName: 'test', log, connectionTimeoutMs: 1000 });
  t.teardown(() => pool.end());
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const deps: OAuthDeps = { settings: oauthSettings(loadConfig(oauthConfig, { JWT_ISSUER: issuer })), log };
  const rt = createOAuthRuntime(pool, deps);
  const http = await startHttpService({
    name: 'identity',
    host: '127.0.0.1',
    port,
    log,
    registry: createRegistry('identity', { defaults: false }),
    maxBodyBytes: 65536,
    checks: [signingKeysCheck(rt)],
    routes: (app, edge) => registerOAuthRoutes(app, edge, rt),
  });
  t.teardown(() => http.close(500));

  const token = await postForm(`${issuer}/token`, { grant_type: 'client_credentials' }, { authorization: basic('svc', 'secret') });
  t.equal(token.status, 503);
  t.equal(token.json.error, 'temporarily_unavailable');
  t.equal(token.headers.get('retry-after'), '1');

  const jwks = await fetch(`${issuer}/.well-known/jwks.json`);
  t.equal(jwks.status, 503);
  t.match(await jwks.json(), { code: 'dependency_unavailable' });

  const authorize = await fetch(`${issuer}/authorize?client_id=web&redirect_uri=https://a.example/cb`);
  t.equal(authorize.status, 503);
  await authorize.text();

  const ready = await fetch(`${issuer}/readyz`);
  t.equal(ready.status, 503);
  t.match(await ready.json(), { checks: { 'signing-keys': /not loaded/ } });
});
