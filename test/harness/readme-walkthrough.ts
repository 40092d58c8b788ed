/**
 * The README's walk-through as data: its `sh` blocks split into steps, each with the output the
 * README says it prints, and a matcher for that output. test/e2e/readme.test.ts runs the steps.
 *
 * The convention (README, "Tests"):
 * - every fenced block whose info string is `sh` is a step of one walk-through, run in document
 *   order in one shell; any other fence (plain, `json`, `ts`, …) is an illustration, never run;
 * - the lines `npm install` and `npm start` (alone, a comment allowed) are the set-up the runner
 *   does itself;
 * - comment lines directly under a command say what it prints: `# 201 {…}` (the status of the
 *   step's last HTTP call, then the JSON it printed), `# {…}` (the JSON alone), continued on
 *   further `#` lines until the JSON closes; `# prints: text` (a line of the output). `…` matches
 *   anything: a value, the rest of a string, more keys of an object, more elements of an array.
 *   Any other comment is prose. Each expectation closes a step; the lines after the last one are a
 *   step of their own.
 */

export interface Expectation {
  /** The HTTP status shown, if any. */
  status?: number;
  /** The JSON shown (pattern text with `…`), if any. */
  json?: string;
  /** A `prints:` line, if any. */
  line?: string;
  /** Where it is in the README (1-based line of its first comment line). */
  at: number;
}

export interface Step {
  /** The shell text to run (the block's lines for this step, expectations removed). */
  script: string;
  /** README line of the step's first line. */
  at: number;
  /** The set-up lines it held, in order (`npm install`, `npm start`), run before `script`. */
  setup: ('install' | 'start')[];
  expect?: Expectation;
}

const SETUP = /^npm (install|start)\s*(#.*)?$/;
const EXPECT_START = /^#\s+(?:(\d{3})\s+)?([[{].*)$/;
const PRINTS = /^#\s+prints:\s?(.*)$/;

/** Every `sh` block of `markdown`: its first line number (1-based, the line after the fence) and lines. */
export function shBlocks(markdown: string): { at: number; lines: string[] }[] {
  const lines = markdown.split('\n');
  const out: { at: number; lines: string[] }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(```+)(.*)$/.exec(lines[i]!);
    if (!fence) continue;
    const info = fence[2]!.trim().split(/\s+/)[0];
    const close = lines.findIndex((l, j) => j > i && l.startsWith(fence[1]!) && l.trim() === fence[1]);
    const end = close < 0 ? lines.length : close;
    if (info === 'sh') out.push({ at: i + 2, lines: lines.slice(i + 1, end) });
    i = end;
  }
  return out;
}

/** Whether the JSON text so far has closed every bracket it opened (strings skipped). */
function balanced(text: string): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return depth <= 0 && !inString;
}

/** The steps of one block (see the module comment). */
export function blockSteps(block: { at: number; lines: string[] }): Step[] {
  const steps: Step[] = [];
  let cur: Step = { script: '', at: block.at, setup: [] };
  let body: string[] = [];
  let lastWasCommand = false;
  const close = (expect?: Expectation): void => {
    cur.script = body.join('\n');
    if (expect) cur.expect = expect;
    if (cur.script.trim() !== '' || cur.setup.length > 0 || expect) steps.push(cur);
    body = [];
    cur = { script: '', at: 0, setup: [] };
  };
  for (let i = 0; i < block.lines.length; i++) {
    const line = block.lines[i]!;
    const n = block.at + i;
    if (cur.at === 0) cur.at = n;
    const setup = SETUP.exec(line.trim());
    if (setup) {
      if (body.some((l) => l.trim() !== '' && !l.trim().startsWith('#'))) close();
      if (cur.at === 0) cur.at = n;
      cur.setup.push(setup[1] as 'install' | 'start');
      lastWasCommand = false;
      continue;
    }
    const json = lastWasCommand ? EXPECT_START.exec(line) : null;
    const prints = lastWasCommand ? PRINTS.exec(line) : null;
    if (json) {
      let text = json[2]!;
      while (!balanced(text) && i + 1 < block.lines.length && block.lines[i + 1]!.startsWith('#')) {
        i++;
        text += block.lines[i]!.replace(/^#\s?/, '');
      }
      // Text after the closing bracket (`(over the threshold: …)`) is prose.
      const exp: Expectation = { at: n, json: cutAfterValue(text) };
      if (json[1]) exp.status = Number(json[1]);
      close(exp);
      lastWasCommand = false;
      continue;
    }
    if (prints) {
      close({ at: n, line: prints[1]!.trim() });
      lastWasCommand = false;
      continue;
    }
    body.push(line);
    const t = line.trim();
    // A comment line or a blank line ends the "directly under a command" window.
    lastWasCommand = t !== '' && !t.startsWith('#');
  }
  close();
  return steps;
}

/** `text` up to the end of its first complete JSON-ish value. */
function cutAfterValue(text: string): string {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) return text.slice(0, i + 1);
    }
  }
  return text;
}

/** Every step of the README's walk-through, in order. */
export function walkthrough(markdown: string): Step[] {
  return shBlocks(markdown).flatMap(blockSteps);
}

// ── the `…` patterns ──────────────────────────────────────────────────────────────────────────

export type Pattern =
  | { kind: 'any' }
  | { kind: 'literal'; value: unknown }
  | { kind: 'string'; glob: RegExp; text: string }
  | { kind: 'object'; entries: [string, Pattern][]; open: boolean }
  | { kind: 'array'; items: (Pattern | 'rest')[] };

const ELLIPSIS = '…';

/** Parses JSON in which `…` may stand for a value, a string's part, object entries or array items. */
export function parsePattern(text: string): Pattern {
  let i = 0;
  const ws = (): void => {
    while (i < text.length && /\s/.test(text[i]!)) i++;
  };
  const fail = (what: string): never => {
    throw new Error(`pattern: ${what} at ${i}: ${text.slice(Math.max(0, i - 20), i)}⟨here⟩${text.slice(i, i + 20)}`);
  };
  const value = (): Pattern => {
    ws();
    const c = text[i];
    if (text.startsWith(ELLIPSIS, i)) {
      i += ELLIPSIS.length;
      return { kind: 'any' };
    }
    if (c === '{') {
      i++;
      const entries: [string, Pattern][] = [];
      let open = false;
      ws();
      if (text[i] === '}') {
        i++;
        return { kind: 'object', entries, open };
      }
      for (;;) {
        ws();
        if (text.startsWith(ELLIPSIS, i)) {
          i += ELLIPSIS.length;
          open = true;
        } else {
          const key = value();
          if (key.kind !== 'literal' || typeof key.value !== 'string') fail('a key');
          ws();
          if (text[i] !== ':') fail('":"');
          i++;
          entries.push([(key as { value: string }).value, value()]);
        }
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') {
          i++;
          return { kind: 'object', entries, open };
        } else fail('"," or "}"');
      }
    }
    if (c === '[') {
      i++;
      const items: (Pattern | 'rest')[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return { kind: 'array', items };
      }
      for (;;) {
        ws();
        if (text.startsWith(ELLIPSIS, i) && /^\s*[,\]]/.test(text.slice(i + ELLIPSIS.length))) {
          i += ELLIPSIS.length;
          items.push('rest');
        } else items.push(value());
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') {
          i++;
          return { kind: 'array', items };
        } else fail('"," or "]"');
      }
    }
    if (c === '"') {
      const start = i;
      i++;
      while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
      i++;
      const s = JSON.parse(text.slice(start, i)) as string;
      if (!s.includes(ELLIPSIS)) return { kind: 'literal', value: s };
      const re = s
        .split(ELLIPSIS)
        .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('[\\s\\S]*');
      return { kind: 'string', glob: new RegExp(`^${re}$`), text: s };
    }
    const m = /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i));
    if (!m) return fail('a value');
    i += m[0].length;
    return { kind: 'literal', value: JSON.parse(m[0]) };
  };
  const p = value();
  ws();
  if (i < text.length) fail('the end');
  return p;
}

/** Where `actual` differs from `pattern` (a JSON path and what), or undefined when it matches. */
export function mismatch(pattern: Pattern, actual: unknown, path = '$'): string | undefined {
  switch (pattern.kind) {
    case 'any':
      return undefined;
    case 'literal':
      return JSON.stringify(pattern.value) === JSON.stringify(actual)
        ? undefined
        : `${path}: ${JSON.stringify(actual)}, expected ${JSON.stringify(pattern.value)}`;
    case 'string':
      return typeof actual === 'string' && pattern.glob.test(actual)
        ? undefined
        : `${path}: ${JSON.stringify(actual)}, expected "${pattern.text}"`;
    case 'object': {
      if (typeof actual !== 'object' || actual === null || Array.isArray(actual))
        return `${path}: ${JSON.stringify(actual)}, expected an object`;
      const a = actual as Record<string, unknown>;
      for (const [k, p] of pattern.entries) {
        if (!(k in a)) return `${path}: no "${k}" in ${JSON.stringify(actual)}`;
        const m = mismatch(p, a[k], `${path}.${k}`);
        if (m) return m;
      }
      if (!pattern.open) {
        const extra = Object.keys(a).filter((k) => !pattern.entries.some(([e]) => e === k));
        if (extra.length > 0) return `${path}: keys the README does not show: ${extra.join(', ')} (add them or …)`;
      }
      return undefined;
    }
    case 'array': {
      if (!Array.isArray(actual)) return `${path}: ${JSON.stringify(actual)}, expected an array`;
      const go = (pi: number, ai: number): boolean => {
        if (pi === pattern.items.length) return ai === actual.length;
        const p = pattern.items[pi]!;
        if (p === 'rest') {
          for (let k = ai; k <= actual.length; k++) if (go(pi + 1, k)) return true;
          return false;
        }
        return ai < actual.length && mismatch(p, actual[ai], `${path}[${ai}]`) === undefined && go(pi + 1, ai + 1);
      };
      return go(0, 0) ? undefined : `${path}: ${JSON.stringify(actual)} does not match the README's array`;
    }
  }
}

/** The last complete JSON value in `output` (what the step's last command printed), if any. */
export function lastJson(output: string): unknown {
  const text = output.trimEnd();
  for (let i = text.length - 1; i >= 0; i--) {
    const c = text[i];
    if (c !== '{' && c !== '[') continue;
    try {
      return JSON.parse(text.slice(i));
    } catch {
      // not the start of the last value
    }
  }
  return undefined;
}

/** Whether `line` (with `…` wildcards) equals one of `output`'s lines. */
export function printsLine(line: string, output: string): boolean {
  const re = new RegExp(
    `^${line
      .split(ELLIPSIS)
      .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
  return output.split('\n').some((l) => re.test(l.trimEnd()));
}

/**
 * Whether re-running a step is harmless, so that a reader's "run it again until it shows this"
 * may be done for them: every command in it is a curl without a method other than GET and
 * without a body.
 */
export function isReadOnly(script: string): boolean {
  const commands = script
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  return (
    commands.length > 0 &&
    commands.every((c) => /^curl\s/.test(c) && !/\s(-X\s*(?!GET\b)\S|-d\b|--data|-T\b|--upload-file|-F\b|--form)/.test(c))
  );
}

/** The README's default ports, each to the variable `npm start` takes it from. */
export const DEFAULT_PORTS: Record<number, string> = {
  8080: 'LIMITER_PORT',
  9090: 'LIMITER_ADMIN_PORT',
  8081: 'CONTROL_PLANE_HTTP_PORT',
  50051: 'CONTROL_PLANE_GRPC_PORT',
  8082: 'NOTIFIER_PORT',
  8083: 'IDENTITY_PORT',
  8084: 'CONSOLE_PORT',
  8089: 'SANDBOX_PORT',
  8090: 'SANDBOX_SMTP_PORT',
};

/** `script` with every `localhost:<default port>` and `127.0.0.1:<default port>` moved to `ports`. */
export function substitutePorts(script: string, ports: Record<string, number>): string {
  return script.replace(/\b(localhost|127\.0\.0\.1):(\d{2,5})\b/g, (all, host: string, p: string) => {
    const name = DEFAULT_PORTS[Number(p)];
    if (!name || ports[name] === undefined) throw new Error(`the README uses port ${p} (${all}), which the walk-through does not know`);
    return `${host}:${ports[name]}`;
  });
}
