/**
 * Loaded by every test process (`--import`, bin/test-files.mjs): at exit, writes the process's CPU
 * (its own, and that of the children it started and reaped: services run as processes, CLIs)
 * from /proc/self/stat to `TEST_CPU_DIR`, for the runner's timing table (bin/test.mjs). PostgreSQL's
 * share is not in it (one server for every file). Nothing else: a test process loads no hook.
 */
import { isMainThread } from 'node:worker_threads';

const cpuDir = process.env.TEST_CPU_DIR;
// A worker thread started with the process's own options loads this too; the process is one.
if (cpuDir && isMainThread && process.platform === 'linux') {
  const [{ readFileSync, writeFileSync }, { join }, { statCpu }] = await Promise.all([
    import('node:fs'),
    import('node:path'),
    import('./proc-cpu.mjs'),
  ]);
  const file = process.env.TEST_FILE ?? process.argv[1] ?? '';
  process.on('exit', () => {
    try {
      writeFileSync(join(cpuDir, `${process.pid}.json`), JSON.stringify({ file, ...statCpu(readFileSync('/proc/self/stat', 'utf8')) }));
    } catch {
      // the table shows no CPU for this file
    }
  });
}
