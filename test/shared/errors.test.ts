// @tier: pure
import t from 'tap';
import { readFileSync } from 'node:fs';
import {
  ERROR_CODES,
  RETIRED_CODES,
  wireOf,
  type AnyErrorCode,
  type ErrorCode,
  type InternalErrorCode,
  type Wire,
} from '../../shared/error-codes.js';
import {
  type CodedError,
  InternalError,
  PlatformError,
  invalidField,
  isCodedError,
  isForCaller,
  isPlatformError,
  problemFor,
  toProblem,
  PROBLEM_CONTENT_TYPE,
} from '../../shared/errors.js';
import { sourceUrl } from '../harness/source.js';

const DOC = new URL('../../docs/errors.md', sourceUrl(import.meta.url));

/**
 * Rows of the markdown tables under `## <heading>` (up to the next `## `), as cell arrays, with the
 * header and separator rows dropped. Cells are trimmed; backticks are kept.
 */
function tableRows(markdown: string, heading: string): string[][] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => l.trim() === `## ${heading}`);
  if (start < 0) return [];
  const rows: string[][] = [];
  for (let i = start + 1; i < lines.length && !/^##\s/.test(lines[i]!); i++) {
    const line = lines[i]!.trim();
    if (!line.startsWith('|')) continue;
    if (/^\|[\s:|-]+\|$/.test(line)) continue; // separator
    if (lines[i + 1] !== undefined && /^\|[\s:|-]+\|$/.test(lines[i + 1]!.trim())) continue; // header
    rows.push(
      line
        .replace(/^\||\|$/g, '')
        .split('|')
        .map((c) => c.trim()),
    );
  }
  return rows;
}

const codeCell = (cell: string | undefined): string | undefined => /^`([a-z0-9_]+)`$/.exec(cell ?? '')?.[1];

t.test('docs/errors.md and the registry list the same codes, with the same statuses', async (t) => {
  const md = readFileSync(DOC, 'utf8');
  const rows = tableRows(md, 'Codes');
  t.ok(rows.length > 0, 'docs/errors.md has a table under "## Codes"');
  const documented = new Map<string, number>();
  for (const row of rows) {
    const code = codeCell(row[0]);
    if (!code) {
      t.fail(`row without a code in backticks: | ${row.join(' | ')} |`);
      continue;
    }
    t.notOk(documented.has(code), `${code} is documented once`);
    documented.set(code, Number(row[1]));
    t.ok((row[2] ?? '').length > 0, `${code} has a meaning`);
  }
  for (const [code, spec] of Object.entries(ERROR_CODES)) {
    t.ok(documented.has(code), `registry code ${code} is in docs/errors.md`);
    if (documented.has(code)) t.equal(documented.get(code), spec.status, `${code}: docs status matches the registry`);
  }
  for (const code of documented.keys()) t.ok(code in ERROR_CODES, `documented code ${code} is in the registry`);
});

t.test('retired codes are never in the registry, and the docs list exactly them', async (t) => {
  for (const code of RETIRED_CODES) t.notOk(code in ERROR_CODES, `retired code ${code} is not reused`);
  const md = readFileSync(DOC, 'utf8');
  t.match(md, /^## Retired codes$/m, 'docs/errors.md has a "## Retired codes" section');
  const retiredDocs = tableRows(md, 'Retired codes').map((r) => codeCell(r[0]));
  t.same(retiredDocs.slice().sort(), RETIRED_CODES.slice().sort());
});

t.test('every code is snake_case with an error status and a title', async (t) => {
  for (const [code, spec] of Object.entries(ERROR_CODES)) {
    t.match(code, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, `${code} is snake_case`);
    t.ok(spec.status >= 400 && spec.status <= 599, `${code}: status ${spec.status} is an error status`);
    t.ok(spec.title.length > 0, `${code} has a title`);
  }
});

t.test('toProblem keeps a PlatformError’s code, status, detail, field, extras and headers', async (t) => {
  const err = new PlatformError('rate_limited', {
    detail: 'quota spent',
    field: 'subject',
    extra: { retry_after: 3, status: 200, code: 'spoofed' },
    headers: { 'retry-after': '3' },
    cause: new Error('redis said: secret internals'),
  });
  const { problem, headers } = toProblem(err);
  t.same(problem, {
    type: 'https://errors.edge-platform.dev/rate_limited',
    title: 'Too many requests',
    status: 429,
    code: 'rate_limited',
    detail: 'quota spent',
    field: 'subject',
    retry_after: 3,
  });
  t.same(headers, { 'retry-after': '3' });
  t.notMatch(JSON.stringify(problem), /secret internals/, 'the cause never reaches the wire');
  t.equal(err.message, 'quota spent');
  t.equal((err.cause as Error).message, 'redis said: secret internals', 'the cause stays on the error for the log');
});

t.test('a PlatformError without detail has no detail member and its title as message', async (t) => {
  const err = new PlatformError('not_found');
  t.equal(err.message, 'Not found');
  t.same(toProblem(err).problem, {
    type: 'https://errors.edge-platform.dev/not_found',
    title: 'Not found',
    status: 404,
    code: 'not_found',
  });
});

t.test('anything else becomes a generic 500 that leaks nothing', async (t) => {
  const thrown: unknown[] = [
    new Error('connect ECONNREFUSED 10.0.0.5:5432 password=hunter2'),
    new TypeError("Cannot read properties of undefined (reading 'hunter2')"),
    'hunter2',
    { message: 'hunter2', code: 'rate_limited', status: 429 },
    null,
  ];
  for (const err of thrown) {
    const { problem, headers } = toProblem(err);
    t.same(problem, { type: 'https://errors.edge-platform.dev/internal', title: 'Internal server error', status: 500, code: 'internal' });
    t.same(headers, {});
    t.notMatch(JSON.stringify(problem), /hunter2|ECONNREFUSED/);
  }
});

t.test('invalidField names the field; problemFor builds without throwing', async (t) => {
  const err = invalidField('channels', 'must be a non-empty array');
  t.equal(err.code, 'invalid_field');
  t.equal(err.status, 400);
  t.same(toProblem(err).problem, {
    type: 'https://errors.edge-platform.dev/invalid_field',
    title: 'A field is missing or invalid',
    status: 400,
    code: 'invalid_field',
    detail: 'channels: must be a non-empty array',
    field: 'channels',
  });
  t.equal(problemFor('unavailable').status, 503);
  t.equal(PROBLEM_CONTENT_TYPE, 'application/problem+json');
});

/** The codes in the tables of each `### ` subsection under `## Codes`, by subsection heading. */
function codesBySubsection(markdown: string): Map<string, string[]> {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => l.trim() === '## Codes');
  const out = new Map<string, string[]>();
  let heading = '';
  for (let i = start + 1; i < lines.length && !/^##\s/.test(lines[i]!); i++) {
    const line = lines[i]!.trim();
    if (line.startsWith('### ')) {
      heading = line.slice(4);
      out.set(heading, []);
      continue;
    }
    const code = line.startsWith('|') ? codeCell(line.replace(/^\|/, '').split('|')[0]!.trim()) : undefined;
    if (code !== undefined) out.get(heading)?.push(code);
  }
  return out;
}

t.test('each code is documented in the table for the wire the registry allows it on', async (t) => {
  const sections = [...codesBySubsection(readFileSync(DOC, 'utf8'))];
  const section = (prefix: string): string[] => sections.find(([h]) => h.startsWith(prefix))?.[1] ?? [];
  const byWire = (w: Wire): AnyErrorCode[] => (Object.keys(ERROR_CODES) as AnyErrorCode[]).filter((c) => wireOf(c) === w).sort();
  t.equal(sections.length, 3, 'three tables under "## Codes"');
  t.same(section('problem+json').sort(), byWire('problem'), 'problem+json table: the codes without `wire`');
  t.same(section('OAuth JSON').sort(), byWire('oauth'), "OAuth JSON table: the codes with wire: 'oauth'");
  t.same(section('Never sent').sort(), byWire('none'), "never-sent table: the codes with wire: 'none'");
  for (const c of byWire('none')) t.equal(ERROR_CODES[c].status, 500, `${c}: never sent, so its status is internal's 500`);
  t.equal(wireOf('no_such_code' as AnyErrorCode), 'none', 'an unregistered string is never for a caller');
});

t.test('a code that is not for the problem wire never leaves as itself, even on a PlatformError (a cast)', async (t) => {
  class SomeInternal extends InternalError {}
  const off = (Object.keys(ERROR_CODES) as AnyErrorCode[]).filter((c) => wireOf(c) !== 'problem');
  t.ok(off.length > 0);
  for (const code of off) {
    const errs: unknown[] = [
      new PlatformError(code as ErrorCode, { detail: 'secret hunter2', field: 'hunter2', headers: { 'x-hunter2': '1' } }),
    ];
    if (wireOf(code) === 'none') errs.push(new SomeInternal(code as InternalErrorCode, 'secret hunter2', { cause: new Error('hunter2') }));
    for (const err of errs) {
      t.notOk(isForCaller(err), `${code}: not for the caller`);
      const { problem, headers } = toProblem(err);
      t.same(
        problem,
        { type: 'https://errors.edge-platform.dev/internal', title: 'Internal server error', status: 500, code: 'internal' },
        code,
      );
      t.same(headers, {});
      t.notMatch(JSON.stringify(problem), /hunter2/);
    }
  }
});

t.test('every error is a CodedError whose code is one union to switch on', async (t) => {
  class SomeInternal extends InternalError<'port_in_use'> {}
  const errs: CodedError[] = [new PlatformError('rate_limited'), new SomeInternal('port_in_use', 'port 5432 is taken')];
  const seen: string[] = [];
  for (const err of errs) {
    t.ok(isCodedError(err));
    t.ok(err instanceof Error);
    switch (err.code) {
      case 'rate_limited':
        seen.push('problem');
        break;
      case 'port_in_use':
        seen.push('internal');
        break;
      default:
        seen.push('other');
    }
    // @ts-expect-error: a string that is not a registered code does not compile
    t.notOk(err.code === 'rate_limitd');
  }
  t.same(seen, ['problem', 'internal']);
  t.ok(isPlatformError(errs[0]) && !isPlatformError(errs[1]), 'isPlatformError: only the problem-wire branch');
  t.notOk(isCodedError(new Error('x')) || isCodedError({ code: 'rate_limited' }), 'a plain error or a look-alike is not a CodedError');
  // @ts-expect-error: a PlatformError takes only problem-wire codes
  const miscast = new PlatformError('port_in_use');
  t.equal(toProblem(miscast).problem.code, 'internal', '... and toProblem holds even so');
});
