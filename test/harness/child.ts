/**
 * A Node.js program a test runs as a real process (a CLI, `npm start`), started as a user starts
 * it: without the test runner's instrumentation.
 *
 * tap's processinfo plugin puts its `--import` in NODE_OPTIONS and wraps child_process so that
 * every process a test starts, and every process those start, loads it again (a module-loading
 * hook on its own thread, a record of each file loaded): 0.44 → 1.25 s of CPU for one run of
 * `dist/bin/quota.js` (bench/RESULTS.md, "Processes a test starts"), for nothing the suite uses
 * (coverage is off; the runner reads only the test files' own process records). The wrapper can
 * not be told to leave a child alone, so the program is started through `env -u NODE_OPTIONS`,
 * which execs it (same pid: signals reach the program itself).
 */

/** The command to spawn, with {@link plainNodeArgs}: `spawn(PLAIN_NODE, plainNodeArgs([script, ...args]), …)`. */
export const PLAIN_NODE = '/usr/bin/env';

/** The arguments that make {@link PLAIN_NODE} run `node <args>` without NODE_OPTIONS. */
export function plainNodeArgs(args: readonly string[]): string[] {
  return ['-u', 'NODE_OPTIONS', process.execPath, ...args];
}

/**
 * The arguments that make {@link PLAIN_NODE} run `program <args>` without NODE_OPTIONS: a program
 * that starts Node itself, such as a `node_modules/.bin` shim (`buf`, whose plugin
 * `protoc-gen-es` is a Node script too, and inherits the environment).
 */
export function plainProgramArgs(program: string, args: readonly string[]): string[] {
  return ['-u', 'NODE_OPTIONS', program, ...args];
}
