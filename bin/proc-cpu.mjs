/**
 * CPU seconds from a `/proc/<pid>/stat` line, for the test runner's timing table (bin/test.mjs)
 * and each test process's record of itself (bin/test-loader.mjs). Plain JavaScript: both run
 * before (or without) the TypeScript build.
 */

/** Linux's USER_HZ: the unit of /proc's CPU times, 100 on every architecture Node runs on. */
const TICKS = 100;

/** `{ own, children }`: the process's user + system time, and that of the children it reaped. */
export function statCpu(stat) {
  // After the parenthesised command (which may hold spaces): utime is field 14, stime 15,
  // cutime 16, cstime 17.
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .slice(11, 15)
    .map(Number);
  return { own: (f[0] + f[1]) / TICKS, children: (f[2] + f[3]) / TICKS };
}
