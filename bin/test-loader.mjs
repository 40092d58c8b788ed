/**
 * A module loader for our TypeScript sources, for a test file that has no compiled copy in dist/
 * (bin/test-files.mjs runs the compiled copy when there is one, which is always after `tsc -b`):
 * it loads each `.ts` module as the JavaScript that `tsc -b` wrote to dist/, or transpiles it when
 * that is missing or older (test-loader-hooks.mjs). A module keeps its own URL (the .ts file).
 *
 * `node --import=./bin/test-loader.mjs test/x.test.ts` runs a test file straight from its source.
 */
import { register } from 'node:module';

register('./test-loader-hooks.mjs', import.meta.url);
await import('./test-cpu.mjs');
