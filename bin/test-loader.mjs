/**
 * `npm test`'s module loader: a test process loads our TypeScript as the JavaScript that `tsc -b`
 * (the runner's first step) already wrote to dist/, instead of ts-node transpiling every imported
 * file again in every test process (the suite's ~225 processes each load hundreds of our files:
 * importing notifier/app.ts costs 4.5 s of CPU through ts-node, 0.5 s from dist/).
 *
 * Only the loading changes: a module keeps its own URL (the .ts file), so `import.meta.url`,
 * relative fixtures and stack traces (through the source map, whose URL is made absolute) are as
 * before. A file of ours with no output in dist/ (or one older than its source because the
 * type-check did not run) is transpiled by the hooks themselves (test-loader-hooks.mjs); tap's own
 * typescript plugin is left out of the suite (.taprc).
 */
import { register } from 'node:module';

register('./test-loader-hooks.mjs', import.meta.url);

// The CPU each test process used, for the runner's timing table (bin/test.mjs `cpuTimes`): its
// own and that of the children it started and reaped (services run as processes, CLIs), from
// /proc/self/stat at exit. PostgreSQL's share is not in it (one server for every file).
const cpuDir = process.env.TEST_CPU_DIR;
if (cpuDir && process.platform === 'linux') {
  const [{ readFileSync, writeFileSync }, { relative, join }, { statCpu }] = await Promise.all([
    import('node:fs'),
    import('node:path'),
    import('./proc-cpu.mjs'),
  ]);
  process.on('exit', () => {
    try {
      const file = relative(process.cwd(), process.argv[1] ?? '');
      writeFileSync(join(cpuDir, `${process.pid}.json`), JSON.stringify({ file, ...statCpu(readFileSync('/proc/self/stat', 'utf8')) }));
    } catch {
      // the table shows no CPU for this file
    }
  });
}
