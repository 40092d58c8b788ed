// @tier: pure
/**
 * The three OpenAPI documents (limiter/control-plane/openapi.ts, notifier/openapi.ts,
 * identity/openapi.ts) lint clean with an independent linter: Redocly CLI (`@redocly/cli`, a
 * devDependency) and its recommended ruleset (test/openapi/redocly/redocly.yaml). The findings
 * accepted on purpose are listed with their reasons in test/openapi/redocly/.redocly.lint-ignore.yaml;
 * any other error or warning fails, and so does an accepted one the linter no longer reports.
 *
 * The documents are the ones the services serve at /openapi.json (the same exported objects),
 * written to a scratch directory beside copies of the two configuration files, because Redocly
 * reads the ignore file's document names relative to the ignore file.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import t from 'tap';
import { controlPlaneOpenApi } from '../../limiter/control-plane/openapi.js';
import { notifierOpenApi } from '../../notifier/openapi.js';
import { identityOpenApi } from '../../identity/openapi.js';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { PLAIN_NODE, plainProgramArgs } from '../harness/child.js';

const REDOCLY = resolve(PROJECT_ROOT, 'node_modules/.bin/redocly');
const CONFIG_DIR = resolve(PROJECT_ROOT, 'test/openapi/redocly');
const IGNORE_FILE = '.redocly.lint-ignore.yaml';

const documents: Record<string, unknown> = {
  'control-plane.json': controlPlaneOpenApi,
  'notifier.json': notifierOpenApi,
  'identity.json': identityOpenApi,
};

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  version: string;
  problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[];
}

/** How many findings the ignore file accepts per document (its `- '#/…'` lines under each name). */
function acceptedCounts(yaml: string): Record<string, number> {
  const counts: Record<string, number> = {};
  let doc: string | undefined;
  for (const line of yaml.split('\n')) {
    const top = /^([^\s#][^:]*):\s*$/.exec(line);
    if (top) {
      doc = top[1]!;
      counts[doc] = 0;
    } else if (doc !== undefined && /^\s+-\s+'#\//.test(line)) counts[doc]! += 1;
  }
  return counts;
}

function lint(dir: string, file: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    // cwd is the scratch directory: Redocly resolves the ignore file from the configuration's folder.
    // Started without the test process's NODE_OPTIONS (test/harness/child.ts): Redocly is a Node program.
    const child = spawn(
      PLAIN_NODE,
      plainProgramArgs(REDOCLY, ['lint', '--config', join(dir, 'redocly.yaml'), '--format=json', join(dir, file)]),
      {
        cwd: dir,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

t.test('Redocly CLI is installed (devDependency @redocly/cli)', async (t) => {
  t.ok(existsSync(REDOCLY), `${REDOCLY} exists (npm ci installs it)`);
});

t.test('the three documents lint clean under the recommended ruleset', async (t) => {
  if (!existsSync(REDOCLY)) return t.fail('no Redocly CLI to run');
  const dir = mkdtempSync(join(tmpdir(), 'openapi-lint-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(join(CONFIG_DIR, 'redocly.yaml'), join(dir, 'redocly.yaml'));
  copyFileSync(join(CONFIG_DIR, IGNORE_FILE), join(dir, IGNORE_FILE));
  const accepted = acceptedCounts(readFileSync(join(CONFIG_DIR, IGNORE_FILE), 'utf8'));
  t.same(Object.keys(accepted).sort(), Object.keys(documents).sort(), 'the ignore file names the three documents');

  for (const [file, doc] of Object.entries(documents)) {
    writeFileSync(join(dir, file), JSON.stringify(doc, null, 2));
    const run = await lint(dir, file);
    let report: LintReport;
    try {
      report = JSON.parse(run.stdout) as LintReport;
    } catch {
      t.fail(`${file}: Redocly printed no JSON report (exit ${run.code})`, { stdout: run.stdout, stderr: run.stderr });
      continue;
    }
    const found = report.problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer ?? '?'}: ${p.message}`);
    t.same(found, [], `${file}: no errors or warnings (Redocly ${report.version})`);
    t.same(report.totals, { errors: 0, warnings: 0, ignored: accepted[file] }, `${file}: exactly the accepted findings are ignored`);
    t.equal(run.code, 0, `${file}: redocly lint exits 0`);
  }

  // The lint can fail: the control plane's document without its servers and licence is refused.
  const { servers: _servers, info, ...rest } = controlPlaneOpenApi as { servers: unknown; info: Record<string, unknown> };
  const { license: _license, ...infoWithout } = info;
  writeFileSync(join(dir, 'broken.json'), JSON.stringify({ ...rest, info: infoWithout }, null, 2));
  const broken = await lint(dir, 'broken.json');
  const rules = (JSON.parse(broken.stdout) as LintReport).problems.map((p) => p.ruleId);
  t.ok(rules.includes('no-empty-servers') && rules.includes('info-license'), `a document without them is reported (${rules.join(', ')})`);
  t.not(broken.code, 0, 'and redocly lint exits non-zero');
});
