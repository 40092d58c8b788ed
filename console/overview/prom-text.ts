/**
 * Reads the Prometheus text exposition format (version 0.0.4, what prom-client writes) into
 * samples. Pure. Only what the overview needs: each sample's metric name, labels and value;
 * comments, HELP/TYPE lines and timestamps are skipped. A line it cannot read is skipped too (one
 * odd series must not hide the others); `NaN`, `+Inf` and `-Inf` are read as numbers.
 */

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;

function parseValue(s: string): number | undefined {
  if (s === '+Inf' || s === 'Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  const n = Number(s);
  return s !== '' && !Number.isNaN(n) ? n : undefined;
}

/** Labels from `{a="x",b="y"}` starting at `i` (the `{`); returns them and the index after `}`. */
function parseLabels(line: string, i: number): { labels: Record<string, string>; end: number } | undefined {
  const labels: Record<string, string> = {};
  i++; // past '{'
  for (;;) {
    while (line[i] === ' ' || line[i] === ',') i++;
    if (line[i] === '}') return { labels, end: i + 1 };
    const m = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(i));
    if (!m) return undefined;
    const key = m[0];
    i += key.length;
    if (line[i] !== '=' || line[i + 1] !== '"') return undefined;
    i += 2;
    let value = '';
    for (;;) {
      const c = line[i];
      if (c === undefined) return undefined;
      if (c === '"') break;
      if (c === '\\') {
        const n = line[i + 1];
        value += n === 'n' ? '\n' : (n ?? '');
        i += 2;
        continue;
      }
      value += c;
      i++;
    }
    labels[key] = value;
    i++; // past the closing quote
  }
}

export function parsePrometheusText(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = NAME_RE.exec(line);
    if (!m) continue;
    const name = m[0];
    let i = name.length;
    let labels: Record<string, string> = {};
    if (line[i] === '{') {
      const l = parseLabels(line, i);
      if (!l) continue;
      labels = l.labels;
      i = l.end;
    }
    const value = parseValue(line.slice(i).trim().split(/\s+/)[0] ?? '');
    if (value === undefined) continue;
    out.push({ name, labels, value });
  }
  return out;
}
