/**
 * Load generators: autocannon in this process (its per-response times recorded at µs resolution),
 * and wrk as a child process when it is installed. Both report one `Measurement`.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { LatencyHistogram } from './latency-histogram.js';
import { spawnPinned } from './processes.js';

export type Tool = 'autocannon' | 'wrk';

export interface Measurement {
  tool: Tool;
  /** Responses per second. */
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses received. */
  responses: number;
  /** Socket errors and timeouts (no response at all). */
  errors: number;
  /** Responses with a status outside 2xx (wrk: outside 2xx and 3xx). */
  non2xx: number;
  /** Count per status code (autocannon only). */
  statuses: Record<string, number>;
  /** Share of one core the server under test used during the run (set by the caller). */
  serverCpu?: number;
}

export interface LoadOptions {
  url: string;
  headers: Record<string, string>;
  connections: number;
  durationSec: number;
  /** Fixed overall request rate (autocannon only); 0 or undefined: as fast as possible. */
  rate?: number;
  /**
   * Rotate one header over `count` values, `<prefix><i>` for i in 0..count-1, one request after
   * another (round robin over all connections): every value is offered the same share of the load.
   */
  rotate?: RotatingHeader;
}

export interface RotatingHeader {
  header: string;
  prefix: string;
  count: number;
}

/** The `i`-th value of a rotating header. */
export function rotatingValue(r: RotatingHeader, i: number): string {
  return `${r.prefix}${i}`;
}

interface AutocannonResult {
  requests: { average: number; total: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodeStats: Record<string, { count: number }>;
}
interface AutocannonInstance {
  on(event: 'response', fn: (client: unknown, status: number | string, bytes: number, ms: number) => void): void;
}
type Autocannon = (opts: Record<string, unknown>, cb: (err: Error | null, r: AutocannonResult) => void) => AutocannonInstance;

// autocannon is CommonJS without type declarations; the little used here is typed above.
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

/** Runs autocannon against `o.url` and measures every response, 429s included. */
export function runAutocannon(o: LoadOptions): Promise<Measurement> {
  const hist = new LatencyHistogram();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: o.url,
        headers: o.headers,
        connections: o.connections,
        duration: o.durationSec,
        pipelining: 1,
        timeout: 10,
        ...(o.rate ? { overallRate: o.rate } : {}),
        ...(o.rotate ? { requests: [rotatingRequest(o.rotate)] } : {}),
      },
      (err, r) => {
        if (err) return reject(err);
        const statuses: Record<string, number> = {};
        for (const [code, s] of Object.entries(r.statusCodeStats)) statuses[code] = s.count;
        resolve({
          tool: 'autocannon',
          rps: r.requests.average,
          p50Ms: hist.percentile(50),
          p99Ms: hist.percentile(99),
          responses: r.requests.total,
          errors: r.errors + r.timeouts,
          non2xx: r.non2xx,
          statuses,
        });
      },
    );
    instance.on('response', (_client, _status, _bytes, ms) => hist.record(ms));
  });
}

/** An autocannon request whose header `r.header` takes the next value of the rotation each time. */
function rotatingRequest(r: RotatingHeader): { setupRequest: (req: { headers?: Record<string, string> }) => unknown } {
  let next = 0;
  const values = Array.from({ length: r.count }, (_, i) => rotatingValue(r, i));
  return {
    setupRequest(req) {
      req.headers = { ...req.headers, [r.header]: values[next]! };
      next = next + 1 === r.count ? 0 : next + 1;
      return req;
    },
  };
}

/** A wrk Lua script that cycles `r.header` through its values (requests formatted once, in init). */
export function rotatingWrkScript(r: RotatingHeader): string {
  return `-- Written by bench/lib/load.ts: ${r.header} rotates over ${r.count} values.
local reqs = {}
local n = ${r.count}
local i = 0
init = function(args)
  for k = 0, n - 1 do
    wrk.headers[${JSON.stringify(r.header)}] = ${JSON.stringify(r.prefix)} .. k
    reqs[k + 1] = wrk.format()
  end
end
request = function()
  i = i % n + 1
  return reqs[i]
end
`;
}

/** wrk's time units (src/units.c) to milliseconds. */
function toMs(value: string, unit: string): number {
  const v = Number(value);
  switch (unit) {
    case 'us':
      return v / 1000;
    case 'ms':
      return v;
    case 's':
      return v * 1000;
    case 'm':
      return v * 60_000;
    case 'h':
      return v * 3_600_000;
    default:
      return NaN;
  }
}

/** Parses `wrk --latency` output. Exported for its own sake: wrk's text is the only interface. */
export function parseWrk(text: string): Measurement {
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m|h)\\s*$`, 'm').exec(text);
    return m ? toMs(m[1]!, m[2]!) : NaN;
  };
  const rps = /^Requests\/sec:\s+([\d.]+)/m.exec(text);
  const total = /^\s*(\d+) requests in /m.exec(text);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  const non = /Non-2xx or 3xx responses: (\d+)/.exec(text);
  if (!rps || !total) throw new Error(`cannot parse wrk output:\n${text}`);
  // wrk counts a connect or read error per attempt; "read" errors also include the peer closing a
  // keep-alive connection, so they are reported, not hidden.
  const errors = sock ? Number(sock[1]) + Number(sock[2]) + Number(sock[3]) + Number(sock[4]) : 0;
  return {
    tool: 'wrk',
    rps: Number(rps[1]),
    p50Ms: pct('50'),
    p99Ms: pct('99'),
    responses: Number(total[1]),
    errors,
    non2xx: non ? Number(non[1]) : 0,
    statuses: {},
  };
}

let wrkRuns = 0;

/** Runs wrk (one thread, pinned to `cpu`) and parses its report. */
export async function runWrk(o: LoadOptions, cpu: string | undefined, scratch: string): Promise<Measurement> {
  const log = join(scratch, `wrk-${++wrkRuns}.log`);
  const args = ['-t1', `-c${o.connections}`, `-d${o.durationSec}s`, '--latency', '--timeout', '10s'];
  for (const [k, v] of Object.entries(o.headers)) if (o.rotate?.header.toLowerCase() !== k.toLowerCase()) args.push('-H', `${k}: ${v}`);
  if (o.rotate) {
    const script = join(scratch, 'wrk-rotate.lua');
    await writeFile(script, rotatingWrkScript(o.rotate));
    args.push('-s', script);
  }
  args.push(o.url);
  const p = spawnPinned('wrk', 'wrk', args, { cpu, logFile: log });
  const code = await p.exited;
  await p.stop();
  const text = await readFile(log, 'utf8');
  if (code !== 0) throw new Error(`wrk exited ${code}:\n${text}`);
  return parseWrk(text);
}
