// @tier: pure
/**
 * docs/capacity.md: the edge's derived figures (sidecar processes, Redis Cluster primaries, and the
 * answers they feed) agree with its own table of inputs. When a bench figure changes, edit the
 * input row; this test then names each derived row to replace and prints it recomputed.
 */
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceUrl } from '../harness/source.js';

const DOC = resolve(fileURLToPath(sourceUrl(import.meta.url)), '../../../docs/capacity.md');
const PEAK = 200_000; // seed 001, Limits: 200,000 requests per second peak

/** `| \`A\` | … | 19,755 | … |` and `| \`u_s\`, \`u_r\` | … | 0.6, 0.5 | … |` → name → value. */
export function parseInputs(md: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of md.split('\n')) {
    const m = /^\| ((?:`\w+`(?:, )?)+) \| [^|]* \| ([^|]+) \|/.exec(line);
    if (!m) continue;
    const names = [...m[1]!.matchAll(/`(\w+)`/g)].map((x) => x[1]!);
    const values = m[2]!
      .trim()
      .split(/,\s+|\s+and\s+/)
      .map((v) => Number(v.replace(/,/g, '').replace(/\s*[A-Za-zµ]+$/, '')));
    if (values.length !== names.length || values.some((v) => !Number.isFinite(v))) continue;
    names.forEach((n, i) => out.set(n, values[i]!));
  }
  return out;
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US');

/** The rows the inputs give, exactly as the document writes them. */
export function derivedRows(inp: Map<string, number>): { rows: string[]; answer: string } {
  const get = (n: string): number => {
    const v = inp.get(n);
    if (v === undefined) throw new Error(`input ${n} is missing from the inputs table`);
    return v;
  };
  const rows: string[] = [];
  const sidecar = (label: string, labelMix: string, A: string, D: string): number[] => {
    const a = get(A);
    const dd = get(D);
    const u = get('u_s');
    const n: number[] = [];
    for (const d of [0, 0.2]) {
      const tUs = ((1 - d) / a + d / dd) * 1e6;
      const busy = (PEAK * tUs) / 1e6;
      const procs = Math.ceil(Number((busy / u).toFixed(6)));
      n.push(procs);
      rows.push(
        d === 0
          ? `| ${label} | 0 | ${tUs.toFixed(1)} | 200,000 / ${int(a)} = ${busy.toFixed(2)} | ${busy.toFixed(2)} / ${u} = ${(busy / u).toFixed(1)} → **${procs}** |`
          : `| ${labelMix} | 0.2 | ${tUs.toFixed(1)} | 200,000 × (0.8 / ${int(a)} + 0.2 / ${int(dd)}) = ${busy.toFixed(2)} | ${(busy / u).toFixed(1)} → **${procs}** |`,
      );
    }
    return n;
  };
  const [r0, r2] = sidecar('Redis (`A_red`, `D_red`)', 'Redis', 'A_red', 'D_red');
  sidecar('in process (`A_mem`, `D_mem`)', 'in process', 'A_mem', 'D_mem');
  const ra = get('R_a');
  const rd = get('R_d');
  const ca = get('c_a');
  const cd = get('c_d');
  const ur = get('u_r');
  const times = (x: number): string => (x === 1 ? '' : ` × ${x}`);
  for (const d of [0, 0.2]) {
    const busy = PEAK * ((1 - d) * (ca / ra) + d * (cd / rd));
    const prim = Math.ceil(Number((busy / ur).toFixed(6)));
    const sum = d === 0 ? `200,000${times(ca)} / ${int(ra)}` : `200,000 × (0.8${times(ca)} / ${int(ra)} + 0.2${times(cd)} / ${int(rd)})`;
    rows.push(`| ${d} | ${sum} = ${busy.toFixed(2)} | ${(busy / ur).toFixed(1)} → ${prim} |`);
  }
  return { rows, answer: `**${r0} sidecar processes** (one core each), **${r2}** if a fifth of requests are refused` };
}

t.test('parseInputs reads single and paired inputs, with units', async (t) => {
  const inp = parseInputs(
    [
      '| `A_red` | admitted | 13,508 | bench |',
      '| `c_a`, `c_d` | calls | 1, 1 | bench |',
      '| `B_r` | bytes | 244 B | here |',
      '| `d` | share | 0 and 0.2 | decision |',
      '| `k` | channels | 1 and 2 | decision |',
      '| not an input | x | 3 | y |',
    ].join('\n'),
  );
  t.same(Object.fromEntries(inp), { A_red: 13508, c_a: 1, c_d: 1, B_r: 244 });
});

t.test('derivedRows: the arithmetic, on round inputs', async (t) => {
  const inp = new Map(
    Object.entries({ A_red: 10000, D_red: 20000, A_mem: 20000, D_mem: 40000, u_s: 0.5, R_a: 50000, R_d: 100000, c_a: 1, c_d: 1, u_r: 0.5 }),
  );
  const { rows, answer } = derivedRows(inp);
  t.equal(rows[0], '| Redis (`A_red`, `D_red`) | 0 | 100.0 | 200,000 / 10,000 = 20.00 | 20.00 / 0.5 = 40.0 → **40** |');
  t.equal(rows[1], '| Redis | 0.2 | 90.0 | 200,000 × (0.8 / 10,000 + 0.2 / 20,000) = 18.00 | 36.0 → **36** |');
  t.equal(rows[4], '| 0 | 200,000 / 50,000 = 4.00 | 8.0 → 8 |');
  t.equal(rows[5], '| 0.2 | 200,000 × (0.8 / 50,000 + 0.2 / 100,000) = 3.60 | 7.2 → 8 |');
  t.equal(answer, '**40 sidecar processes** (one core each), **36** if a fifth of requests are refused');
  inp.set('c_a', 0.5);
  t.equal(derivedRows(inp).rows[4], '| 0 | 200,000 × 0.5 / 50,000 = 2.00 | 4.0 → 4 |', 'a call rate below 1 shows in the row');
  t.equal(derivedRows(inp).rows[5], '| 0.2 | 200,000 × (0.8 × 0.5 / 50,000 + 0.2 / 100,000) = 2.00 | 4.0 → 4 |');
});

t.test("docs/capacity.md's edge figures follow from its inputs", async (t) => {
  const md = await readFile(DOC, 'utf8');
  const inp = parseInputs(md);
  for (const name of ['A_mem', 'D_mem', 'A_red', 'D_red', 'R_a', 'R_d', 'c_a', 'c_d', 'u_s', 'u_r']) {
    t.ok(inp.has(name), `input ${name} is in the inputs table`);
  }
  const { rows, answer } = derivedRows(inp);
  const lines = new Set(md.split('\n'));
  for (const row of rows) t.ok(lines.has(row), `docs/capacity.md has the row, recomputed from the inputs:\n${row}`);
  t.ok(md.includes(answer), `the Answers table says, recomputed from the inputs:\n${answer}`);
});
