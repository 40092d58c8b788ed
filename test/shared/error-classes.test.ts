// @tier: pure
/**
 * Every error class of every domain under the one base: each is a `CodedError` with a registered
 * code, and only its own edge's mapping ever shows it to a caller. The classes that never reach a
 * caller become the generic `internal` at the HTTP and gRPC edges; `OAuthError` keeps its RFC wire
 * format at the OAuth endpoints and is `internal` anywhere else.
 */
import t from 'tap';
import { status as grpcStatus } from '@grpc/grpc-js';
import { ERROR_CODES, wireOf, type AnyErrorCode, type OAuthErrorCode } from '../../shared/error-codes.js';
import { CodedError, InternalError, isCodedError, isPlatformError, toProblem } from '../../shared/errors.js';
import { toGrpcError, GRPC_ERROR_CODE_KEY } from '../../shared/grpc.js';
import { ConfigError, loadConfig, nonEmpty } from '../../shared/config.js';
import { MigrationError } from '../../shared/migrate.js';
import { EmbeddedPostgresError } from '../../shared/embedded-postgres.js';
import { importPinnedKey, KeyImportError } from '../../shared/jwt/keys.js';
import { SnapshotFileError } from '../../limiter/snapshot-store.js';
import { TokenRefused, isTokenRefused } from '../../notifier/channels/google-oauth.js';
import { TemplateSyntaxError } from '../../notifier/templates/errors.js';
import { parseTemplate } from '../../notifier/templates/syntax.js';
import { BASIC_CHALLENGE, OAuthError, oauthErrorReply } from '../../identity/oauth/oauth-error.js';
import { testLogger } from '../harness/log.js';

const INTERNAL_PROBLEM = {
  type: 'https://errors.edge-platform.dev/internal',
  title: 'Internal server error',
  status: 500,
  code: 'internal',
};
const SECRET = 'hunter2';

async function thrown(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  throw new Error('did not throw');
}

t.test('the classes that never reach a caller: InternalErrors with their codes, answered as internal', async (t) => {
  const cases: [name: string, err: unknown, code: AnyErrorCode][] = [
    [
      'ConfigError',
      await thrown(() => loadConfig({ X: { default: undefined, description: '', services: ['test'], parse: nonEmpty } }, {})),
      'config_variable_invalid',
    ],
    [
      'MigrationError',
      new MigrationError('migration_failed', `migrations: 002_${SECRET}.sql failed`, { file: `002_${SECRET}.sql` }),
      'migration_failed',
    ],
    ['EmbeddedPostgresError', new EmbeddedPostgresError('port_in_use', `port 5432 (${SECRET}) is in use`), 'port_in_use'],
    ['SnapshotFileError', new SnapshotFileError(`/var/${SECRET}.json`, 'is a delta, not a full snapshot'), 'snapshot_file_unusable'],
    ['KeyImportError', await thrown(() => importPinnedKey({ kid: SECRET, kty: 'oct', k: SECRET })), 'key_import_failed'],
    ['TemplateSyntaxError', await thrown(() => parseTemplate(`${SECRET} {{`)), 'template_syntax_error'],
    ['TokenRefused', new TokenRefused(`token endpoint said invalid_grant: ${SECRET}`), 'provider_token_refused'],
  ];
  for (const [name, err, code] of cases) {
    t.ok(err instanceof InternalError && err instanceof CodedError && err instanceof Error, `${name} is an InternalError`);
    t.ok(isCodedError(err), name);
    t.notOk(isPlatformError(err), `${name} is not a PlatformError`);
    t.match(err, { name, code }, `${name}: name and code`);
    t.equal(wireOf(code), 'none', `${code} is marked never to be sent`);
    if (code === 'port_in_use' || code === 'migration_failed' || code === 'snapshot_file_unusable' || code === 'provider_token_refused') {
      t.match((err as Error).message, SECRET, `${name}: the message keeps its detail for the log`);
    }
    const { problem, headers } = toProblem(err);
    t.same(problem, INTERNAL_PROBLEM, `${name}: toProblem answers internal`);
    t.same(headers, {});
    const g = toGrpcError(err);
    t.equal(g.code, grpcStatus.INTERNAL, `${name}: gRPC INTERNAL`);
    t.equal(g.details, 'internal error');
    t.same(g.metadata?.get(GRPC_ERROR_CODE_KEY), ['internal']);
    t.notMatch(JSON.stringify(problem) + String(g.details) + String(g.message), SECRET, `${name}: nothing leaks`);
  }
  t.ok(cases[0]![1] instanceof ConfigError && cases[4]![1] instanceof KeyImportError && cases[5]![1] instanceof TemplateSyntaxError);
  t.ok(isTokenRefused(cases[6]![1]));
});

// The statuses RFC 6749 §5.2, RFC 8628 §3.5 and OpenID Connect give, as the token endpoint has
// always answered them.
const OAUTH_STATUS: Record<OAuthErrorCode, number> = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  unsupported_response_type: 400,
  invalid_scope: 400,
  access_denied: 400,
  server_error: 500,
  temporarily_unavailable: 503,
  authorization_pending: 400,
  slow_down: 400,
  expired_token: 400,
  login_required: 400,
  // RFC 9449 §5, §8
  invalid_dpop_proof: 400,
  use_dpop_nonce: 400,
};

t.test('OAuthError: a CodedError whose code is its RFC error, on the wire only as OAuth JSON', async (t) => {
  const log = testLogger();
  const oauthCodes = (Object.keys(ERROR_CODES) as AnyErrorCode[]).filter((c) => wireOf(c) === 'oauth').sort();
  t.same(oauthCodes, Object.keys(OAUTH_STATUS).sort(), "the registry's OAuth codes are the RFC codes we send");
  for (const [code, status] of Object.entries(OAUTH_STATUS) as [OAuthErrorCode, number][]) {
    const err = new OAuthError(code, 'what went wrong');
    t.ok(isCodedError(err) && !isPlatformError(err), code);
    t.match(err, { name: 'OAuthError', code, error: code, description: 'what went wrong', status, message: `${code}: what went wrong` });
    const reply = oauthErrorReply(err, log, 'test');
    const headers: Record<string, string> = { 'cache-control': 'no-store', pragma: 'no-cache' };
    if (code === 'invalid_client') headers['www-authenticate'] = BASIC_CHALLENGE;
    t.same(
      reply,
      { status, body: { error: code, error_description: 'what went wrong' }, contentType: 'application/json;charset=UTF-8', headers },
      `${code}: the OAuth wire format`,
    );
    t.same(toProblem(err).problem, INTERNAL_PROBLEM, `${code}: off its own edge, internal`);
    t.equal(toGrpcError(err).code, grpcStatus.INTERNAL);
  }
});

t.test('oauthErrorReply answers an InternalError as server_error, as it did any unknown error', async (t) => {
  const reply = oauthErrorReply(new EmbeddedPostgresError('start_failed', SECRET), testLogger(), 'test');
  t.equal(reply.status, 500);
  t.same(reply.body, { error: 'server_error', error_description: 'the server could not complete the request' });
});
