/**
 * Starts the test servers by hand, for running single test files outside `npm test`:
 *
 *   npx tsc -b && node dist/test/harness/servers.js
 *
 * prints `export DATABASE_URL=… REDIS_URL=… TEST_REDIS_CLUSTER_NODES=…` (servers you already set in
 * the environment are reused, not started) and keeps them up until Ctrl-C.
 */
import { setupGlobal } from './global.js';

const servers = await setupGlobal().catch((err: unknown) => {
  process.stderr.write(`test servers could not start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
for (const [k, v] of Object.entries(servers.env)) process.stdout.write(`export ${k}='${v}'\n`);
process.stdout.write('# up; Ctrl-C stops them\n');

let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  servers.teardown().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
