/**
 * A Node.js program a test runs as a real process (a CLI, `npm start`), started as a user starts
 * it: without whatever NODE_OPTIONS the test process was given.
 *
 * A test runner's instrumentation travels in NODE_OPTIONS to every process a test starts, and to
 * every process those start: under tap's runner (which `npm test` no longer uses:
 * bin/test-files.mjs) its processinfo hook took one run of `dist/bin/quota.js` from 0.44 to 1.25 s
 * of CPU (bench/RESULTS.md, "Processes a test starts"); a developer's `--inspect` would make every
 * child fight for the port. So the program is started through `env -u NODE_OPTIONS`, which execs
 * it (same pid: signals reach the program itself).
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
