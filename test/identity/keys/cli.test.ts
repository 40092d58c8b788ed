/**
 * `npm run keys` (bin/keys.ts) against a real identity: list, revoke, and the exit status and the
 * one stderr line of each failure mode. Runs the compiled CLI (npm test builds dist/ first).
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import t from 'tap';
import { ADMIN_TOKEN, startOAuthServer } from '../oauth/helpers.js';
import { PLAIN_NODE, plainNodeArgs } from '../../harness/child.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function keys(args: string[], env: Record<string, string | undefined>): Promise<Run> {
  const child = spawn(PLAIN_NODE, plainNodeArgs([resolve('dist/bin/keys.js'), ...args]), {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((done) => child.on('close', (code) => done({ code, stdout, stderr })));
}

t.test('list and revoke through the CLI', async (t) => {
  const srv = await startOAuthServer(t, 'keys_cli');
  const env = { IDENTITY_URL: srv.issuer, IDENTITY_ADMIN_TOKEN: ADMIN_TOKEN };
  const k = srv.running.runtime.keys.signingKey().kid;

  const listed = await keys(['list'], env);
  t.equal(listed.code, 0, listed.stderr);
  t.match(listed.stdout, new RegExp(`^${k}  ES256  signing `, 'm'));

  const revoked = await keys(['revoke', k, '--reason', 'leaked'], env);
  t.equal(revoked.code, 0, revoked.stderr);
  const successor = srv.running.runtime.keys.signingKey().kid;
  t.not(successor, k);
  t.match(revoked.stdout, new RegExp(`^${k} revoked at \\S+; ${successor} signs from now on \\(created\\)$`, 'm'));

  const again = await keys(['revoke', k, '--json'], env);
  t.equal(again.code, 0);
  t.match(JSON.parse(again.stdout), { kid: k, already_revoked: true, successor: null });

  const after = await keys(['list'], env);
  t.match(after.stdout, new RegExp(`^${k}  ES256  revoked .* revoked \\S+ \\(leaked\\)$`, 'm'));

  t.match(await keys(['revoke', 'no-such-kid'], env), { code: 1, stderr: 'keys: 404 not_found: no such signing key\n' });
  // A kid is base64url: one in 32 starts with '-', and must not be read as a flag (CI met one).
  t.match(await keys(['revoke', '-0no-such-kid', '--reason', 'x'], env), { code: 1, stderr: 'keys: 404 not_found: no such signing key\n' });
  t.match(await keys(['revoke', '--', '-0no-such-kid'], env), { code: 1, stderr: 'keys: 404 not_found: no such signing key\n' });
  t.match(await keys(['revoke', k], { ...env, IDENTITY_ADMIN_TOKEN: 'x'.repeat(40) }), { code: 1, stderr: /^keys: 401 / });
  t.match(await keys(['revoke'], env), { code: 2, stderr: /^keys: revoke needs the kid of the key\n/ });
  t.match(await keys(['rotate'], env), { code: 2, stderr: /^keys: a command is required: list or revoke\n/ });
  t.match(await keys(['list'], { IDENTITY_URL: srv.issuer }), { code: 2, stderr: /^keys: set IDENTITY_ADMIN_TOKEN/ });
});
