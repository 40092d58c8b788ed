/**
 * The hooks of bin/test-loader.mjs (module.register runs them on the loader thread), for a test file
 * run from its source: `npm test` runs the compiled copy (bin/test-files.mjs) when there is one.
 *
 * They do all the TypeScript loading of a test process: tap's typescript plugin is left out of the
 * suite (.taprc), because merely starting its ts-node (loading the TypeScript compiler on the
 * loader thread) cost every test process about 1.3 s of CPU, most of what a short test file costs.
 *
 * - resolve: a relative `./x.js` that does not exist, imported from one of our `.ts` files, is
 *   `./x.ts` (TypeScript's nodenext convention, which ts-node followed).
 * - load: a `.ts` file under the root is the JavaScript that `tsc -b` wrote to dist/ when that is
 *   at least as new as the source; else (no output, or the type-check did not run) it is
 *   transpiled here, one file without type information as ts-node's transpile-only mode did, with
 *   the TypeScript compiler loaded only then. TEST_DIST_CURRENT=1 says that `tsc -b` just passed:
 *   dist/ is then current whatever the dates say (tsc does not write an output again when its
 *   source only got a newer date, as after a `git checkout` or `git stash pop`, and every module
 *   would otherwise be transpiled again).
 */
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { dirname, join, relative, resolve as resolvePath, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolvePath(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
const distCurrent = process.env.TEST_DIST_CURRENT === '1';

/** Whether a path is one of our sources (not dist/, not node_modules/, not outside the root). */
function ours(path) {
  const rel = relative(root, path);
  return !(
    rel.startsWith('..') ||
    rel.startsWith(`dist${sep}`) ||
    rel.startsWith(`node_modules${sep}`) ||
    rel.includes(`${sep}node_modules${sep}`)
  );
}

/** The compiled file of a source under the root, or undefined when it has none that is current. */
async function compiled(path) {
  if (!ours(path)) return undefined;
  const out = join(dist, relative(root, path).replace(/\.ts$/, '.js'));
  try {
    if (distCurrent) return (await stat(out)).isFile() ? out : undefined;
    const [src, js] = await Promise.all([stat(path), stat(out)]);
    return js.mtimeMs >= src.mtimeMs ? out : undefined;
  } catch {
    return undefined;
  }
}

export async function resolve(specifier, context, nextResolve) {
  const parent = context.parentURL;
  if (
    parent?.startsWith('file:') &&
    parent.endsWith('.ts') &&
    specifier.endsWith('.js') &&
    (specifier.startsWith('./') || specifier.startsWith('../'))
  ) {
    const url = new URL(specifier, parent);
    const path = fileURLToPath(url);
    if (ours(path) && !existsSync(path)) {
      const ts = path.replace(/\.js$/, '.ts');
      if (existsSync(ts)) return { url: pathToFileURL(ts).href, format: 'module', shortCircuit: true };
    }
  }
  return nextResolve(specifier, context);
}

let typescript;
/** The file transpiled on its own (no type information), its source map inline. */
async function transpile(path) {
  typescript ??= (await import('typescript')).default;
  const ts = typescript;
  const { outputText } = ts.transpileModule(await readFile(path, 'utf8'), {
    fileName: path,
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2023,
      verbatimModuleSyntax: true,
      sourceMap: false,
      inlineSourceMap: true,
      inlineSources: true,
    },
  });
  return outputText;
}

export async function load(url, context, nextLoad) {
  if (url.startsWith('file:') && url.endsWith('.ts') && !url.endsWith('.d.ts')) {
    const path = fileURLToPath(url);
    const out = await compiled(path);
    if (out) {
      const js = await readFile(out, 'utf8');
      // The map's URL is relative to the module's, which is the .ts file's: make it absolute.
      const source = js.replace(
        /\/\/# sourceMappingURL=(\S+)\s*$/,
        (_, map) => `//# sourceMappingURL=${pathToFileURL(join(dirname(out), map)).href}\n`,
      );
      return { format: 'module', source, shortCircuit: true };
    }
    if (ours(path)) return { format: 'module', source: await transpile(path), shortCircuit: true };
  }
  return nextLoad(url, context);
}
