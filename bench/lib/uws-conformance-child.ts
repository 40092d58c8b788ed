/**
 * Runs the uWS conformance cases (test/limiter/fixtures/uws-conformance.ts) against the build that
 * `require('uWebSockets.js')` loads in this process, and prints one JSON line: the build, whether
 * it is native, the names it exports and puts on a request, and each case's outcome.
 * bench/uws-builds.ts starts it once per build, with bench/lib/uws-redirect.cjs preloaded.
 */
import { createRequire } from 'node:module';
import { nativeBuild } from '../../shared/uws.js';
import { installedBuild, requestApi, runConformance } from '../../test/limiter/fixtures/uws-conformance.js';

const results = await runConformance();
const exportsOf = Object.keys(createRequire(import.meta.url)('uWebSockets.js') as object).sort();
process.stdout.write(JSON.stringify({ build: installedBuild(), nativeBuild, exports: exportsOf, requestApi, results }) + '\n');
process.exit(0);
