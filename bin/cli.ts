/**
 * What the admin CLIs in bin/ (quota.ts, keys.ts, admin.ts) share: strict argument parsing, the usage
 * error, the configuration (with `npm start`'s secrets file), and how a run ends. Exit codes: 0 done; 1 the operation failed (`describe` says why, on one
 * line); 2 bad usage (with the usage text) or bad configuration.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loadConfig, type ConfigOf, type VarSpec } from '../shared/config.js';
import { isCodedError } from '../shared/errors.js';
import { secretsPath, withSecrets } from '../shared/secrets-file.js';

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

/**
 * The CLI's configuration from the environment, where the secrets `npm start` generated
 * (`<DATA_DIR>/secrets.env`) fill the variables left unset: `npm run quota` works beside `npm start`
 * with nothing exported, and an exported variable still wins.
 */
export function loadCliConfig<S extends Record<string, VarSpec<unknown>> & { DATA_DIR: VarSpec<string> }>(
  spec: S,
  env: Record<string, string | undefined> = process.env,
): ConfigOf<S> {
  const { DATA_DIR } = loadConfig({ DATA_DIR: spec.DATA_DIR }, env);
  return loadConfig(spec, withSecrets(secretsPath(DATA_DIR), env));
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
