/**
 * What the admin CLIs in bin/ (quota.ts, keys.ts) share: strict argument parsing, the usage error,
 * and how a run ends. Exit codes: 0 done; 1 the operation failed (`describe` says why, on one
 * line); 2 bad usage (with the usage text) or bad configuration.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { isCodedError } from '../shared/errors.js';

/**
 * Bad arguments. Deliberately not a `CodedError` with a registry code: it never leaves its CLI's
 * own `main`, reaches no wire and no other module, so there is nothing for a caller to narrow on.
 */
export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;

/** `argv` parsed strictly against `options`, positionals allowed; a parse error is a `UsageError`. */
export function parseCommandLine<const O extends Options>(argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** Runs `main` and exits with its code, or with 2 (usage, configuration) or 1 (anything else) when it throws. */
export function runCli(name: string, usage: string, main: () => Promise<number>, describe: (err: unknown) => string): void {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      if (err instanceof UsageError) {
        process.stderr.write(`${name}: ${err.message}\n${usage}\n`);
        process.exit(2);
      }
      if (isCodedError(err) && err.code === 'config_variable_invalid') {
        process.stderr.write(`${name}: ${err.message}\n`);
        process.exit(2);
      }
      process.stderr.write(`${name}: ${describe(err)}\n`);
      process.exit(1);
    },
  );
}
