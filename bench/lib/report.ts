/**
 * The sidecar benchmark's report: the markdown table, the ratios against their targets (`ratios`),
 * the machine it ran on, and the section of bench/RESULTS.md it owns.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import type { DecisionLatency } from './decision-latency.js';
import type { Measurement, Tool } from './load.js';

export interface Row {
  /** Stable id the ratios look rows up by, e.g. `sidecar-memory-admit`, `rate-direct`. */
  id: string;
  label: string;
  m: Measurement;
}

const fmtInt = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en') : 'n/a');
const fmtMs = (n: number): string => (Number.isFinite(n) ? n.toFixed(3) : 'n/a');
const pct = (part: number, whole: number): string => {
  if (whole <= 0) return '0%';
  const p = (part / whole) * 100;
  return p === 0 ? '0%' : p < 0.01 ? '<0.01%' : `${p.toFixed(2)}%`;
};

/**
 * One row per scenario and tool: of its rounds, the one with the median requests/s (the lower
 * middle of an even count), its label noting every round's figure when there were several.
 */
export function medians(rows: readonly Row[]): Row[] {
  const groups = new Map<string, Row[]>();
  for (const r of rows) {
    const k = `${r.id}\u0000${r.m.tool}`;
    const g = groups.get(k);
    if (g) g.push(r);
    else groups.set(k, [r]);
  }
  return [...groups.values()].map((g) => {
    if (g.length === 1) return g[0]!;
    const sorted = [...g].sort((a, b) => a.m.rps - b.m.rps);
    const mid = sorted[(sorted.length - 1) >> 1]!;
    const each = g.map((r) => Math.round(r.m.rps).toLocaleString('en')).join(' · ');
    return { ...mid, label: `${mid.label} (median of ${g.length}: ${each})` };
  });
}

/** Main markdown table: one line per scenario and tool. */
export function table(rows: readonly Row[]): string {
  const lines = [
    '| scenario | tool | requests/s | p50 ms | p99 ms | errors / non-2xx | server CPU | CPU µs / request |',
    '|---|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const attempts = r.m.responses + r.m.errors;
    const cpu = r.m.serverCpu === undefined || !Number.isFinite(r.m.serverCpu) ? 'n/a' : `${Math.round(r.m.serverCpu * 100)}%`;
    lines.push(
      `| ${r.label} | ${r.m.tool} | ${fmtInt(r.m.rps)} | ${fmtMs(r.m.p50Ms)} | ${fmtMs(r.m.p99Ms)} | ${pct(r.m.errors, attempts)} / ${pct(r.m.non2xx, r.m.responses)} | ${cpu} | ${cpuPerRequest(r.m)} |`,
    );
  }
  return lines.join('\n');
}

/** The server's CPU time per response, µs: what a row costs, whatever set its rate. */
export function cpuUs(m: Measurement): number {
  return m.serverCpu !== undefined && Number.isFinite(m.serverCpu) && m.rps > 0 ? (m.serverCpu / m.rps) * 1e6 : NaN;
}
function cpuPerRequest(m: Measurement): string {
  const us = cpuUs(m);
  return Number.isFinite(us) ? us.toFixed(1) : 'n/a';
}

function find(rows: readonly Row[], id: string, tool: Tool): Measurement | undefined {
  return rows.find((r) => r.id === id && r.m.tool === tool)?.m;
}

/** What the ratios need besides the rows. */
export interface RatioContext {
  stores: readonly string[];
  /** Decision latency per sidecar store, measured during `rate-sidecar-<store>`. */
  decisions: readonly DecisionLatency[];
  /** Why there is no approximate-mode row, when there is none. */
  approxMissing?: string;
  /** Why there is no baseline row, when there is none. */
  baselineMissing?: string;
  /** The other uWS build measured in the same run (`--uws-peer`), as `name@version`. */
  uwsPeer?: string;
}

interface Target {
  what: string;
  ours: string;
  peer: string;
  /** Ratio ours/peer at least this; undefined: reported without a target. */
  atLeast?: number;
  /** Said instead of the ratio when one of the rows is missing (else the line is left out). */
  missing?: string;
}

/**
 * The ratios with their targets (issue 17, item 8, and issue 3's against nginx), one line each
 * with a verdict, per load tool; lines whose rows were not measured are left out unless they say
 * why they are missing.
 */
export function ratios(rows: readonly Row[], ctx: RatioContext): string {
  const out: string[] = [];
  const targets: Target[] = [
    {
      what: 'abuse workload, Redis store vs in-process (requests/s)',
      ours: 'sidecar-redis-abuse',
      peer: 'sidecar-memory-abuse',
      atLeast: 0.9,
    },
    {
      what: 'admitted, Redis store in approximate mode vs in-process',
      ours: 'sidecar-redis-approx-admit',
      peer: 'sidecar-memory-admit',
      atLeast: 0.8,
      ...(ctx.approxMissing ? { missing: ctx.approxMissing } : {}),
    },
    {
      what: 'admitted, Redis store (exact) vs the baseline build',
      ours: 'sidecar-redis-admit',
      peer: 'baseline-redis-admit',
      atLeast: 1.3,
      ...(ctx.baselineMissing ? { missing: ctx.baselineMissing } : {}),
    },
    {
      what: "admitted, in-process vs the bare uWS + h1 proxy (the floor: the sidecar's own upstream client)",
      ours: 'sidecar-memory-admit',
      peer: 'bare-admit',
      atLeast: 0.8,
    },
    {
      what: 'admitted, in-process vs the fastify gateway (in-process)',
      ours: 'sidecar-memory-admit',
      peer: 'fastify-memory-admit',
      atLeast: 2.5,
    },
    {
      what: 'denied, in-process vs the fastify gateway (in-process)',
      ours: 'sidecar-memory-deny',
      peer: 'fastify-memory-deny',
      atLeast: 3,
    },
    { what: 'abuse workload, in-process vs the fastify gateway (in-process)', ours: 'sidecar-memory-abuse', peer: 'fastify-memory-abuse' },
    { what: 'admitted, Redis store vs the fastify gateway on Redis', ours: 'sidecar-redis-admit', peer: 'fastify-redis-admit' },
    { what: 'denied, Redis store vs the fastify gateway on Redis', ours: 'sidecar-redis-deny', peer: 'fastify-redis-deny' },
    { what: 'abuse workload, Redis store vs the fastify gateway on Redis', ours: 'sidecar-redis-abuse', peer: 'fastify-redis-abuse' },
    { what: 'admitted, in-process baseline build vs this build', ours: 'sidecar-memory-admit', peer: 'baseline-memory-admit' },
    // Issue 23: the pinned uWS build against the one it replaced, same sidecar code, same run.
    ...(ctx.uwsPeer
      ? ctx.stores.flatMap((s): Target[] => [
          {
            what: `admitted, ${s} store: the pinned uWS build vs ${ctx.uwsPeer}`,
            ours: `sidecar-${s}-admit`,
            peer: `uwspeer-${s}-admit`,
            atLeast: 0.95,
          },
          {
            what: `denied, ${s} store: the pinned uWS build vs ${ctx.uwsPeer}`,
            ours: `sidecar-${s}-deny`,
            peer: `uwspeer-${s}-deny`,
            atLeast: 0.95,
          },
          // The same request rate offered to both: requests/s are equal by design, and CPU per
          // request compares like with like (the same batching of reads and writes).
          {
            what: `admitted at a fixed rate, ${s} store: the pinned uWS build vs ${ctx.uwsPeer} (read by CPU per request)`,
            ours: `rate-sidecar-${s}`,
            peer: `rate-uwspeer-${s}`,
          },
        ])
      : []),
    // Issue 3's targets against nginx, kept for comparison.
    ...ctx.stores.flatMap((s): Target[] => [
      { what: `admitted, ${s} store vs nginx`, ours: `sidecar-${s}-admit`, peer: 'nginx-admit', atLeast: 0.75 },
      { what: `denied, ${s} store vs nginx`, ours: `sidecar-${s}-deny`, peer: 'nginx-deny', atLeast: 1 },
    ]),
  ];
  for (const tool of ['autocannon', 'wrk'] as const) {
    if (!rows.some((r) => r.m.tool === tool)) continue;
    out.push(`Ratios, ${tool}:`, '');
    for (const t of targets) {
      const ours = find(rows, t.ours, tool);
      const peer = find(rows, t.peer, tool);
      if (!ours || !peer) {
        if (t.missing) out.push(`- ${t.what}: not measured (${t.missing})${t.atLeast ? `; target ≥ ${t.atLeast}×` : ''}`);
        continue;
      }
      if (!(ours.rps > 0 && peer.rps > 0)) {
        out.push(`- ${t.what}: not measurable (${fmtInt(ours.rps)} vs ${fmtInt(peer.rps)} req/s: a run that served nothing)`);
        continue;
      }
      const ratio = ours.rps / peer.rps;
      const verdict = t.atLeast === undefined ? '' : `; target ≥ ${t.atLeast}×: ${ratio >= t.atLeast ? 'met' : 'not met'}`;
      // The same comparison in CPU time per request: what the ratio would be were both servers saturated.
      const byCpu = cpuUs(peer) / cpuUs(ours);
      const cpu = Number.isFinite(byCpu) ? `; by CPU per request ${byCpu.toFixed(2)}×` : '';
      out.push(`- ${t.what}: **${ratio.toFixed(2)}×** (${fmtInt(ours.rps)} vs ${fmtInt(peer.rps)} req/s${verdict}${cpu})`);
    }
    out.push('');
  }
  const direct = find(rows, 'rate-direct', 'autocannon');
  const nginx = find(rows, 'rate-nginx', 'autocannon');
  const nginxAdded = direct && nginx ? nginx.p99Ms - direct.p99Ms : undefined;
  if (direct) {
    out.push('Latency at a fixed rate (autocannon):', '');
    const baselines = ctx.stores.map((s) => `rate-baseline-${s}`);
    for (const id of [...ctx.stores.map((s) => `rate-sidecar-${s}`), ...baselines, 'rate-nginx']) {
      const m = find(rows, id, 'autocannon');
      if (!m) continue;
      const added = m.p99Ms - direct.p99Ms;
      const baseline = baselines.includes(id);
      const store = id.slice(baseline ? 'rate-baseline-'.length : 'rate-sidecar-'.length);
      const who = id === 'rate-nginx' ? 'nginx (peer)' : `${baseline ? 'baseline build' : 'sidecar'}, ${store} store`;
      let verdict = '';
      if (store === 'memory' && nginxAdded !== undefined) {
        const limit = nginxAdded + 0.5;
        verdict = `; target ≤ nginx's added p99 + 0.5 ms = ${limit.toFixed(3)} ms: ${added <= limit ? 'met' : 'not met'}`;
      }
      out.push(
        `- added p99, ${who}: **${added >= 0 ? '+' : ''}${added.toFixed(3)} ms** over direct (p99 ${fmtMs(m.p99Ms)} vs ${fmtMs(direct.p99Ms)} ms; p50 ${fmtMs(m.p50Ms)} vs ${fmtMs(direct.p50Ms)} ms${verdict})`,
      );
    }
  }
  for (const d of ctx.decisions) {
    const verdict = d.store === 'redis' ? `; target < 2 ms: ${d.p99Ms < 2 ? 'met' : 'not met'}` : '';
    out.push(
      `- decision latency (\`ratelimit_decision_duration_seconds\`, arrival in the uWS callback → decision), sidecar, ${d.store} store: ` +
        `p99 **≤ ${fmtMs(d.p99Ms)} ms**, p50 ≤ ${fmtMs(d.p50Ms)} ms (bucket bounds, ${fmtInt(d.count)} decisions${verdict})`,
    );
  }
  return out.join('\n').trim();
}

/**
 * Warnings about rows whose figures do not mean what their label says: a proxied row close to the
 * direct one (the load generator, not the proxy, was the limit), an admitting row with refusals,
 * a denying row that admitted, a fixed-rate row that missed its rate.
 */
export function warnings(rows: readonly Row[], rate: number): string[] {
  const out: string[] = [];
  for (const r of rows) {
    const m = r.m;
    const direct = find(rows, 'direct', m.tool);
    if (direct && r.id !== 'direct' && !r.id.startsWith('rate-') && m.rps >= 0.9 * direct.rps)
      out.push(`${r.label} (${m.tool}) reached ${fmtInt(m.rps)} req/s, ≥ 90% of direct: likely load-generator bound`);
    else if (!r.id.startsWith('rate-') && m.serverCpu !== undefined && m.serverCpu < 0.85)
      out.push(
        `${r.label} (${m.tool}): the server under test used ${Math.round(m.serverCpu * 100)}% of a core: the load generator (or a noisy machine), not the server, set this figure`,
      );
    if ((r.id.endsWith('-admit') || r.id.startsWith('rate-') || r.id === 'direct') && m.non2xx > 0.001 * m.responses)
      out.push(`${r.label} (${m.tool}): ${pct(m.non2xx, m.responses)} non-2xx on an admitting path ${JSON.stringify(m.statuses)}`);
    if (r.id.endsWith('-deny') && m.non2xx < 0.99 * m.responses)
      out.push(`${r.label} (${m.tool}): only ${pct(m.non2xx, m.responses)} refused on the denying path`);
    if (r.id.endsWith('-abuse') && m.non2xx < 0.8 * m.responses)
      out.push(
        `${r.label} (${m.tool}): only ${pct(m.non2xx, m.responses)} refused (about 90% expected): the load offered each subject less than 10× its limit (see --abuse-rps)`,
      );
    if (m.errors > 0.001 * (m.responses + m.errors)) out.push(`${r.label} (${m.tool}): ${fmtInt(m.errors)} socket errors or timeouts`);
    if (r.id.startsWith('rate-') && m.rps < 0.95 * rate)
      out.push(`${r.label}: ${fmtInt(m.rps)} req/s, below the fixed rate of ${fmtInt(rate)}: the latency figures are not at that rate`);
  }
  return out;
}

export interface Machine {
  cores: number;
  cpu: string;
  node: string;
  nginx: string;
  wrk: string;
  redis: string;
  kernel: string;
}

/** The first line a command prints (wrk -v exits 1 after printing its version, so any status). */
function firstLine(cmd: string, args: string[]): string | undefined {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error) return undefined;
  return (r.stdout || r.stderr).trim().split('\n')[0] || undefined;
}

/**
 * nproc, the CPU model from /proc/cpuinfo (os.cpus() elsewhere), versions. Call it before pinning
 * this process: nproc counts only the cores a process may run on.
 */
export function machine(nginx: string | undefined): Machine {
  let cpu = cpus()[0]?.model ?? 'unknown';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m) cpu = m[1]!.trim();
  } catch {
    // not Linux: os.cpus() it is
  }
  return {
    cores: Number(firstLine('nproc', [])) || cpus().length,
    cpu,
    node: process.version,
    nginx: nginx ?? 'nginx not installed',
    wrk: firstLine('wrk', ['-v'])?.replace(/ \[.*$/, '') ?? 'wrk not installed',
    redis:
      firstLine('redis-server', ['--version'])
        ?.replace(/^Redis server v=/, '')
        .replace(/ sha=.*$/, '') ?? 'not installed',
    kernel: firstLine('uname', ['-sr']) ?? 'unknown',
  };
}

export const RESULTS_HEADING = '## Sidecar (issue 3)';
const RESULTS_HEADER = `# Benchmark results

Latest figures of the scripts in bench/, each section written by its own script (\`npm run bench\`
and friends) with the machine and the date. Re-running a script replaces its section only.
`;

/**
 * `text` with the section under `heading` (up to the next \`## \` heading) replaced by `body`, or
 * appended when absent. Other sections are left byte for byte.
 */
export function replaceSection(text: string, heading: string, body: string): string {
  const section = `${heading}\n\n${body.trim()}\n`;
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim() === heading);
  if (start < 0) return `${text.replace(/\n*$/, '')}\n\n${section}`;
  let end = lines.findIndex((l, i) => i > start && /^## /.test(l));
  if (end < 0) end = lines.length;
  const before = lines.slice(0, start).join('\n');
  const after = lines.slice(end).join('\n');
  return `${before}${before ? '\n' : ''}${section}${after ? `\n${after}` : ''}`;
}

/** Writes (or replaces) this bench's section of RESULTS.md (`heading`, by default {@link RESULTS_HEADING}), creating the file when missing. */
export function writeResults(file: string, body: string, heading = RESULTS_HEADING): void {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : RESULTS_HEADER;
  writeFileSync(file, replaceSection(text, heading, body).replace(/\n*$/, '\n'));
}
