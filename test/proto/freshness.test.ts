// @tier: pure
/**
 * The generated code under proto/gen is what `npm run gen` produces from proto/ now: regenerate into
 * a temporary directory with the same buf CLI, plugin and template, and compare file by file.
 * Also keeps the contracts buf-lint clean and buf-formatted.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PLAIN_NODE, plainProgramArgs } from '../harness/child.js';
import { sourceUrl } from '../harness/source.js';

const root = fileURLToPath(new URL('../../', sourceUrl(import.meta.url)));
const buf = join(root, 'node_modules/.bin/buf');

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

/**
 * `buf` is a Node shim around the native binary, and `buf generate` runs the plugin, a Node script:
 * both are started as a user would, without the test process's NODE_OPTIONS (test/harness/child.ts).
 */
function run(args: string[]): { status: number | null; output: string } {
  const r = spawnSync(PLAIN_NODE, plainProgramArgs(buf, args), { cwd: root, encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}${r.error ? String(r.error) : ''}` };
}

t.test('proto/gen matches a fresh `buf generate` (run `npm run gen` when this fails)', async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'proto-gen-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const gen = run(['generate', 'proto', '--template', 'proto/buf.gen.yaml', '-o', out]);
  t.equal(gen.status, 0, `buf generate: ${gen.output}`);

  const fresh = join(out, 'proto/gen');
  const committed = join(root, 'proto/gen');
  const freshFiles = filesUnder(fresh);
  t.ok(freshFiles.length >= 3, 'one file per contract at least');
  t.strictSame(filesUnder(committed), freshFiles, 'the same files');
  for (const file of freshFiles) {
    const same = readFileSync(join(fresh, file), 'utf8') === readFileSync(join(committed, file), 'utf8');
    t.ok(same, `${file} is up to date`);
  }
});

t.test('the contracts pass buf lint and are buf-formatted', async (t) => {
  const lint = run(['lint', 'proto']);
  t.equal(lint.status, 0, lint.output || 'lint clean');
  const format = run(['format', '--diff', '--exit-code', 'proto']);
  t.equal(format.status, 0, format.output || 'formatted');
});
