// @tier: pure
/**
 * `.data/secrets.env` (shared/secrets-file.ts): created once with mode 0600, reused as it is,
 * appended to for a secret an older file lacks, and read by the CLIs under the environment.
 */
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureSecrets, parseSecrets, readSecrets, withSecrets } from '../../shared/secrets-file.js';

const dir = mkdtempSync(join(tmpdir(), 'secrets-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('the first call generates and writes every secret, 0600; the second reads them back unchanged', async (t) => {
  const path = join(dir, 'a', '.data', 'secrets.env');
  let n = 0;
  const random = (bytes: number): Buffer => Buffer.alloc(bytes, ++n);
  const first = ensureSecrets(path, { ADMIN_TOKEN: 24, IDENTITY_ADMIN_TOKEN: 32 }, random);
  t.same(first.created, ['ADMIN_TOKEN', 'IDENTITY_ADMIN_TOKEN']);
  t.equal(first.values.ADMIN_TOKEN, Buffer.alloc(24, 1).toString('base64url'));
  t.equal(statSync(path).mode & 0o777, 0o600, 'only its owner reads it');
  t.same(readSecrets(path), first.values);

  const again = ensureSecrets(path, { ADMIN_TOKEN: 24, IDENTITY_ADMIN_TOKEN: 32 }, random);
  t.same(again, { values: first.values, created: [] }, 'reused, nothing generated');

  const grown = ensureSecrets(path, { ADMIN_TOKEN: 24, SERVICE_SECRET: 24 }, random);
  t.same(grown.created, ['SERVICE_SECRET'], 'a secret the file lacks is generated and appended');
  t.equal(grown.values.ADMIN_TOKEN, first.values.ADMIN_TOKEN);
  t.same(Object.keys(readSecrets(path)), ['ADMIN_TOKEN', 'IDENTITY_ADMIN_TOKEN', 'SERVICE_SECRET']);
});

t.test('a looser file is tightened to 0600 when written', async (t) => {
  const path = join(dir, 'loose.env');
  writeFileSync(path, 'ADMIN_TOKEN=x\n', { mode: 0o644 });
  ensureSecrets(path, { ADMIN_TOKEN: 24, IDENTITY_ADMIN_TOKEN: 32 });
  t.equal(statSync(path).mode & 0o777, 0o600);
  t.match(readFileSync(path, 'utf8'), /^ADMIN_TOKEN=x\nIDENTITY_ADMIN_TOKEN=\S{43}\n$/);
});

t.test('parsing: NAME=value lines; comments, blanks and lines without = skipped; = inside a value kept', async (t) => {
  t.same(parseSecrets('# c\n\nA=1\n B = two \nnoequals\n=x\nC=a=b\n'), { A: '1', B: 'two', C: 'a=b' });
  t.same(readSecrets(join(dir, 'none.env')), {}, 'no file: no secrets');
});

t.test('withSecrets: the file fills what the environment leaves unset or empty; a set variable wins', async (t) => {
  const path = join(dir, 'cli.env');
  writeFileSync(path, 'ADMIN_TOKEN=from-file\nIDENTITY_ADMIN_TOKEN=file-identity\n');
  t.same(withSecrets(path, { ADMIN_TOKEN: 'from-env', IDENTITY_ADMIN_TOKEN: '', OTHER: 'x' }), {
    ADMIN_TOKEN: 'from-env',
    IDENTITY_ADMIN_TOKEN: 'file-identity',
    OTHER: 'x',
  });
});
