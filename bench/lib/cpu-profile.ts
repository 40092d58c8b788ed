/**
 * Self time per function from a V8 `.cpuprofile` (what `node --cpu-prof` writes): the time spent
 * in a function's own code, not its callees, summed over every call-tree node with the same
 * function name and location. Locations in dist/ are mapped back to the TypeScript source when the
 * build wrote a source map beside the file.
 */
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  /** 0-based. */
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
  /** Samples per source line (1-based) of this node's own code. */
  positionTicks?: { line: number; ticks: number }[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  /** µs before each sample. */
  timeDeltas: number[];
}

export interface SelfTime {
  /** `name (file:line)`, the source location when a map is available. */
  name: string;
  selfMs: number;
  /** Share of all sampled time, (idle) included. */
  share: number;
  /** Share of the time the process was not idle. */
  busyShare: number;
}

const maps = new Map<string, SourceMap | null>();
const texts = new Map<string, string[]>();

/** Column of the first non-blank character of a generated line: where its mapping starts. */
function firstColumn(file: string, line0: number): number {
  let lines = texts.get(file);
  if (!lines) {
    lines = existsSync(file) ? readFileSync(file, 'utf8').split('\n') : [];
    texts.set(file, lines);
  }
  const text = lines[line0] ?? '';
  const col = text.search(/\S/);
  return col < 0 ? 0 : col;
}

function sourceMapFor(file: string): SourceMap | null {
  let m = maps.get(file);
  if (m === undefined) {
    m = null;
    const mapFile = `${file}.map`;
    if (existsSync(mapFile)) {
      try {
        m = new SourceMap(JSON.parse(readFileSync(mapFile, 'utf8')) as ConstructorParameters<typeof SourceMap>[0]);
      } catch {
        m = null;
      }
    }
    maps.set(file, m);
  }
  return m;
}

/** `file:line` relative to `root`, through the source map when there is one (1-based line). */
function location(frame: CallFrame, root: string, line0 = frame.lineNumber, column0?: number): string {
  if (!frame.url) return '';
  if (!frame.url.startsWith('file://')) return `${frame.url}:${line0 + 1}`;
  const file = fileURLToPath(frame.url);
  const map = sourceMapFor(file);
  if (map) {
    const col = column0 ?? (line0 === frame.lineNumber ? frame.columnNumber : firstColumn(file, line0));
    const e = map.findEntry(line0, col) as { originalSource?: string; originalLine?: number };
    if (e.originalSource !== undefined && e.originalLine !== undefined) {
      const src = e.originalSource.startsWith('file://') ? fileURLToPath(e.originalSource) : e.originalSource;
      const abs = src.startsWith('/') ? src : new URL(src, frame.url).pathname;
      return `${relative(root, abs)}:${e.originalLine + 1}`;
    }
  }
  return `${relative(root, file)}:${line0 + 1}`;
}

/** A function the profile is narrowed to: its URL contains `url` and it is named `functionName`. */
export interface Focus {
  url: string;
  functionName: string;
}

/**
 * Per sample, its duration (µs) and node id, kept only between the first and the last sample whose
 * stack holds the `focus` function: that drops start-up (module loading, caches allocated up front)
 * and shutdown, which a short profiled run would otherwise overweight.
 */
function samples(profile: CpuProfile, focus: Focus | undefined): { id: number; us: number }[] {
  const stamps: number[] = [];
  let t = profile.startTime;
  for (const d of profile.timeDeltas) stamps.push((t += d));
  // Sample i lasts until sample i+1 (the last one until endTime), as Chrome DevTools counts it.
  const all = profile.samples.map((id, i) => ({
    id,
    us: Math.max(0, (i + 1 < stamps.length ? stamps[i + 1]! : profile.endTime) - stamps[i]!),
  }));
  if (focus === undefined) return all;
  const parent = new Map<number, number>();
  const isFocus = new Map<number, boolean>();
  for (const n of profile.nodes) {
    isFocus.set(n.id, n.callFrame.functionName === focus.functionName && n.callFrame.url.includes(focus.url));
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const inFocus = new Map<number, boolean>();
  const focused = (id: number): boolean => {
    let r = inFocus.get(id);
    if (r === undefined) {
      const p = parent.get(id);
      r = isFocus.get(id) === true || (p !== undefined && focused(p));
      inFocus.set(id, r);
    }
    return r;
  };
  let first = -1;
  let last = -1;
  for (let i = 0; i < all.length; i++) {
    if (focused(all[i]!.id)) {
      if (first < 0) first = i;
      last = i;
    }
  }
  return first < 0 ? all : all.slice(first, last + 1);
}

/** The `n` functions with the most self time (see `samples` for `focus`). */
export function topSelfTime(profile: CpuProfile, root: string, n = 15, focus?: Focus): SelfTime[] {
  const byId = new Map<number, ProfileNode>();
  for (const node of profile.nodes) byId.set(node.id, node);
  const selfUs = new Map<number, number>();
  for (const s of samples(profile, focus)) selfUs.set(s.id, (selfUs.get(s.id) ?? 0) + s.us);
  const byName = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)?.callFrame;
    if (!frame) continue;
    total += us;
    if (frame.functionName === '(idle)') idle += us;
    const loc = location(frame, root);
    const name = `${frame.functionName || '(anonymous)'}${loc ? ` (${loc})` : ''}`;
    byName.set(name, (byName.get(name) ?? 0) + us);
  }
  const busy = total - idle;
  return [...byName.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({
      name,
      selfMs: us / 1000,
      share: total > 0 ? us / total : 0,
      busyShare: busy > 0 && !name.startsWith('(idle)') ? us / busy : 0,
    }));
}

/**
 * The hottest source lines of the files whose URL contains `within` (e.g. `/dist/limiter/`), by
 * sample count over the whole profile (V8 keeps line ticks per node, not per sample).
 */
export function hotLines(profile: CpuProfile, root: string, within: string, n = 10): { line: string; ticks: number }[] {
  const byLine = new Map<string, number>();
  for (const node of profile.nodes) {
    if (!node.callFrame.url.includes(within)) continue;
    for (const t of node.positionTicks ?? []) {
      const key = location(node.callFrame, root, t.line - 1);
      byLine.set(key, (byLine.get(key) ?? 0) + t.ticks);
    }
  }
  return [...byLine.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([line, ticks]) => ({ line, ticks }));
}
