/**
 * The repository's import graph, read from the sources (TypeScript's own pre-processor, so imports
 * in comments and strings are not counted; `import type`, re-exports and `import()` are), for the
 * tests that hold the folders' boundaries: which file imports which, and the cycles among them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { sourceUrl } from './source.js';

/** The repository root (this file is test/harness/imports.ts). */
export const ROOT = resolve(dirname(fileURLToPath(sourceUrl(import.meta.url))), '../..');

/** Repository-relative paths (with `/`) of the `.ts` files under `dir` (relative to the root). */
export function sourcesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(join(ROOT, d), { withFileTypes: true })) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory()) {
        if (e.name !== 'node_modules' && e.name !== 'gen') walk(p);
      } else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

/**
 * The relative imports of one source file, as repository-relative `.ts` paths (our sources import
 * `./x.js`, which is `./x.ts` before compiling). Package imports are left out.
 */
export function importsOf(file: string, source = readFileSync(join(ROOT, file), 'utf8')): string[] {
  const info = ts.preProcessFile(source, true, true);
  const out = new Set<string>();
  for (const { fileName } of info.importedFiles) {
    if (!fileName.startsWith('.')) continue;
    const abs = resolve(ROOT, dirname(file), fileName.replace(/\.js$/, '.ts'));
    out.add(relative(ROOT, abs).split(sep).join('/'));
  }
  return [...out].sort();
}

/** Each file's imports that stay among `files`. */
export function graphOf(files: readonly string[]): Map<string, string[]> {
  const inside = new Set(files);
  return new Map(files.map((f) => [f, importsOf(f).filter((i) => inside.has(i))]));
}

/**
 * Every import cycle in `graph`, each as the files in import order with the first repeated at the
 * end (`a.ts → b.ts → a.ts`); one cycle per strongly connected component, so a tangle of three
 * files is reported once.
 */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  // Tarjan's strongly connected components; a component of more than one file, or a file that
  // imports itself, holds a cycle.
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1 || (graph.get(v) ?? []).includes(v)) components.push(c);
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return components.map((c) => cycleThrough(graph, new Set(c), c.sort()[0]!));
}

/** A path from `start` back to itself inside `component` (breadth first: the shortest). */
function cycleThrough(graph: ReadonlyMap<string, readonly string[]>, component: Set<string>, start: string): string[] {
  const prev = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!component.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let u = v; u !== start; u = prev.get(u)!) path.splice(1, 0, u);
        return [...path, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}
