/**
 * The admin CLI (dist/bin/quota.js, built by `tsc -b`) as a real process against a running control
 * plane: put, get, list, delete, readable output, one-line errors and exit codes.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PLAIN_NODE, plainNodeArgs } from '../harness/child.js';
import { useTestDatabase } from '../harness/db.js';
import { ADMIN_TOKEN, useControlPlane } from './helpers.js';
import { sourceUrl } from '../harness/source.js';

const CLI = fileURLToPath(new URL('../../dist/bin/quota.js', sourceUrl(import.meta.url)));
if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -b\` first (npm test does)`);

const db = await useTestDatabase(t, 'cp_cli');
const cp = await useControlPlane(t, db.url, { CONTROL_PLANE_ACK_TIMEOUT: '100ms' });

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function quota(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      PLAIN_NODE,
      plainNodeArgs([CLI, ...args]),
      { env: { ...process.env, CONTROL_PLANE_GRPC_URL: cp.grpc, ADMIN_TOKEN, LOG_LEVEL: 'silent', ...env }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const RAW = 'cli-raw-key-0001';
const HASHED = `key:${createHash('sha256').update(RAW).digest('hex')}`;

t.test('put, get, list and delete', async (t) => {
  const plan = await quota([
    'put',
    '--subject',
    'plan:team',
    '--rate',
    '100',
    '--burst',
    '150',
    '--unit',
    'minute',
    '--route',
    '/v1/search=5',
  ]);
  t.equal(plan.code, 0, plan.stderr);
  t.match(plan.stdout, /^subject_id\s+plan:team$/m);
  t.match(plan.stdout, /^interval_ms\s+60000$/m);
  t.match(plan.stdout, /^routes\s+\/v1\/search cost 5$/m);
  t.match(plan.stdout, /^accuracy\s+exact$/m, 'exact unless asked');

  const key = await quota(['put', '--key', RAW, '--rate', '0', '--plan', 'team']);
  t.equal(key.code, 0, key.stderr);
  t.match(key.stdout, new RegExp(`^subject_id\\s+${HASHED}$`, 'm'), 'the key is shown hashed');
  t.notMatch(key.stdout + key.stderr, RAW, 'never raw');
  t.match(key.stdout, /^lagging\s+-$/m);

  // Reads, side by side (each run is a Node process's start, most of its time).
  const [got, json, list] = await Promise.all([
    quota(['get', '--key', RAW]),
    quota(['get', '--subject', 'plan:team', '--json']),
    quota(['list', '--page-size', '1']),
  ]);
  t.equal(got.code, 0, got.stderr);
  t.match(got.stdout, /^plan\s+team$/m);
  t.equal(json.code, 0);
  t.same((JSON.parse(json.stdout) as { burst: number }).burst, 150, '--json prints the record as JSON');

  t.equal(list.code, 0, list.stderr);
  t.match(list.stdout, /^SUBJECT\s+ALGORITHM\s+RATE\s+BURST\s+INTERVAL\s+PLAN\s+VERSION$/m, 'a table');
  t.match(list.stdout, new RegExp(`^${HASHED}\\s+-\\s+0\\s+0\\s+-\\s+team\\s+\\d+$`, 'm'));
  t.match(list.stdout, /^plan:team\s+token_bucket\s+100\s+150\s+60000ms\s+team\s+\d+$/m);
  t.match(list.stdout, /^2 quotas$/m, 'every page');

  const del = await quota(['delete', '--key', RAW]);
  t.equal(del.code, 0, del.stderr);
  t.match(del.stdout, /^deleted\s+key:/m);
  const again = await quota(['delete', '--key', RAW]);
  t.equal(again.code, 1, 'deleting nothing fails');
  t.match(again.stderr, /^quota: NOT_FOUND/);
});

t.test('failures: one line on stderr and a non-zero exit', async (t) => {
  // None changes anything: all seven side by side.
  const [missing, invalid, refused, usage, unknown, noSubject, down] = await Promise.all([
    quota(['get', '--subject', 'user:nobody']),
    quota(['put', '--subject', 'ip:10.0.0.1', '--rate', '5']),
    quota(['get', '--subject', 'plan:team'], { ADMIN_TOKEN: 'a-wrong-admin-token-value' }),
    quota(['put', '--subject', 'user:x', '--rate', 'lots']),
    quota(['frobnicate']),
    quota(['get']),
    quota(['list'], { CONTROL_PLANE_GRPC_URL: '127.0.0.1:1' }),
  ]);
  t.same([missing.code, missing.stderr], [1, 'quota: NOT_FOUND: no quota for this subject\n']);

  t.equal(invalid.code, 1);
  t.match(invalid.stderr, /^quota: INVALID_ARGUMENT: quota\.subject_id: .+\n$/);

  t.equal(refused.code, 1);
  t.match(refused.stderr, /^quota: UNAUTHENTICATED: /);

  t.equal(usage.code, 2, 'bad usage exits 2');
  t.match(usage.stderr, /^quota: --rate must be a whole number, got lots\n/);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /^quota: unknown command frobnicate/);
  t.equal(noSubject.code, 2);

  t.equal(down.code, 1);
  t.match(down.stderr, /^quota: UNAVAILABLE: cannot reach the control plane at 127\.0\.0\.1:1/);
});

t.test('--accuracy', async (t) => {
  const [approx, window] = await Promise.all([
    quota(['put', '--subject', 'user:approx', '--rate', '10', '--burst', '40', '--accuracy', 'approximate']),
    quota(['put', '--subject', 'user:w', '--rate', '10', '--algorithm', 'fixed_window', '--accuracy', 'approximate']),
  ]);
  t.equal(approx.code, 0, approx.stderr);
  t.match(approx.stdout, /^accuracy\s+approximate$/m, '--accuracy approximate is stored');
  t.equal(window.code, 1, 'refused for a window algorithm');
  t.match(window.stderr, /quota\.accuracy/);
  t.equal((await quota(['delete', '--subject', 'user:approx'])).code, 0);
});
