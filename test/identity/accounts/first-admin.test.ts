/**
 * Making the first admin, against a real identity over real PostgreSQL: IDENTITY_BOOTSTRAP_ADMIN
 * promotes the named account as soon as it signs up, once (a later demotion stands), audited in
 * role_changes; `npm run admin -- promote <email>` (the compiled bin/admin.ts; npm test builds
 * dist/ first) with its exit statuses; and the OAuth client registry driven with the new admin's
 * own access token: list, register, rotate a secret shown once.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import t from 'tap';
import { startAdminBootstrap } from '../../../identity/accounts/bootstrap-admin.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';
import { startTestIdentity } from './helpers.js';
import { PLAIN_NODE, plainNodeArgs } from '../../harness/child.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function adminCli(args: string[], env: Record<string, string | undefined>): Promise<Run> {
  const child = spawn(PLAIN_NODE, plainNodeArgs([resolve('dist/bin/admin.js'), ...args]), {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((done) => child.on('close', (code) => done({ code, stdout, stderr })));
}

const PASSWORD = 'correct horse battery staple';

t.test('IDENTITY_BOOTSTRAP_ADMIN promotes the account once it signs up, once, audited', async (t) => {
  const id = await startTestIdentity(t, 'first_admin_bootstrap', { IDENTITY_BOOTSTRAP_ADMIN: ' Ops@Example.test ' });
  t.ok(await id.signup('someone@example.test', PASSWORD), 'another account signs up first');
  const userId = await id.signup('ops@example.test', PASSWORD);
  const role = await waitFor(
    async () => {
      const { rows } = await id.pool.query<{ role: string }>('SELECT role FROM credentials WHERE user_id = $1', [userId]);
      return rows[0]?.role === 'admin' ? 'admin' : undefined;
    },
    { timeoutMs: 15_000, what: 'the bootstrap to promote the account' },
  );
  t.equal(role, 'admin');
  t.match(await id.identity.adminBootstrap?.done, { outcome: 'promoted', userId, from: 'customer' });
  const { rows: audit } = await id.pool.query('SELECT user_id, from_role, to_role, changed_by FROM role_changes ORDER BY change_id');
  t.same(audit, [{ user_id: userId, from_role: 'customer', to_role: 'admin', changed_by: 'bootstrap' }], 'one audit row');
  const { rows: others } = await id.pool.query(`SELECT count(*)::int AS n FROM credentials WHERE role = 'admin'`);
  t.equal(others[0].n, 1, 'nobody else');

  const token = await id.login('ops@example.test', PASSWORD);
  t.equal((await id.call('GET', '/auth/admin/clients', { token })).status, 200, 'the new admin uses the admin API with its own token');

  // An operator demotes the account: a later start (another replica, a restart) leaves it demoted.
  await id.pool.query(`UPDATE credentials SET role = 'support' WHERE user_id = $1`, [userId]);
  const again = startAdminBootstrap({ pool: id.pool, email: 'ops@example.test', clock: id.clock, log: testLogger('bootstrap') });
  t.match(await again.done, { outcome: 'bootstrapped_before', userId });
  again.close();
  const { rows: after } = await id.pool.query<{ role: string }>('SELECT role FROM credentials WHERE user_id = $1', [userId]);
  t.equal(after[0]!.role, 'support', 'the demotion stands');
});

t.test('npm run admin -- promote <email>: promotes, says so, exits 0; 1 without the account; 2 on bad usage', async (t) => {
  const id = await startTestIdentity(t, 'first_admin_cli');
  const databaseUrl = (id.pool as unknown as { options: { connectionString: string } }).options.connectionString;
  const env = { DATABASE_URL: databaseUrl };
  const userId = await id.signup('first@example.test', PASSWORD);

  const done = await adminCli(['promote', 'First@Example.test'], env);
  t.equal(done.code, 0, done.stderr);
  t.match(done.stdout, new RegExp(`^first@example\\.test \\(user ${userId}\\) is now an admin \\(was customer\\)`));
  const { rows } = await id.pool.query('SELECT from_role, to_role, changed_by FROM role_changes WHERE user_id = $1', [userId]);
  t.match(rows, [{ from_role: 'customer', to_role: 'admin', changed_by: /^cli:/ }]);

  const repeat = await adminCli(['promote', 'first@example.test', '--json'], env);
  t.equal(repeat.code, 0);
  t.same(JSON.parse(repeat.stdout), { email: 'first@example.test', outcome: 'already_admin', userId });
  t.equal((await id.pool.query('SELECT 1 FROM role_changes')).rowCount, 1, 'nothing changed, nothing audited');

  t.match(await adminCli(['promote', 'nobody@example.test'], env), {
    code: 1,
    stderr: 'admin: no account with the e-mail nobody@example.test (sign up first)\n',
  });
  t.match(await adminCli(['promote'], env), { code: 2, stderr: /^admin: promote needs the e-mail of the account\nusage:/ });
  t.match(await adminCli(['promote', 'not-an-email'], env), { code: 2, stderr: /^admin: not an e-mail address: not-an-email/ });
  t.match(await adminCli(['demote', 'a@example.test'], env), { code: 2 });
  t.match(await adminCli(['promote', 'a@example.test'], {}), { code: 2, stderr: /DATABASE_URL/ });

  // The OAuth client registry with the promoted admin's own access token.
  const token = await id.login('first@example.test', PASSWORD);
  const reg = await id.call('POST', '/auth/admin/clients', {
    token,
    body: {
      client_id: 'console-test',
      client_type: 'confidential',
      name: 'Console',
      redirect_uris: ['http://127.0.0.1:8084/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      scope: 'openid',
    },
  });
  t.equal(reg.status, 201, reg.text);
  const secret = reg.json!.client_secret;
  t.type(secret, 'string', 'the secret is shown at registration');
  t.equal(reg.headers.get('cache-control'), 'no-store');
  const list = await id.call('GET', '/auth/admin/clients', { token });
  t.equal(list.status, 200);
  const listed = (list.json!.clients as Record<string, unknown>[]).find((c) => c.client_id === 'console-test');
  t.ok(listed, 'listed');
  t.notOk('client_secret' in listed!, 'never in the list');
  t.notOk('client_secret' in (await id.call('GET', '/auth/admin/clients/console-test', { token })).json!, 'never on read');
  const rotated = await id.call('POST', '/auth/admin/clients/console-test/secret', { token });
  t.equal(rotated.status, 200);
  t.type(rotated.json!.client_secret, 'string');
  t.not(rotated.json!.client_secret, secret, 'a new secret, shown once');
  t.equal(rotated.headers.get('cache-control'), 'no-store');

  const customer = await id.signup('customer@example.test', PASSWORD);
  t.ok(customer);
  const customerToken = await id.login('customer@example.test', PASSWORD);
  t.equal((await id.call('GET', '/auth/admin/clients', { token: customerToken })).status, 403);
  t.equal((await id.call('POST', '/auth/admin/clients/console-test/secret', { token: customerToken })).status, 403);
  t.equal((await id.call('GET', '/auth/admin/clients')).status, 401);
});
