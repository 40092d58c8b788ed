/**
 * The signing-key admin CLI: calls identity's admin API (`/auth/admin/keys`).
 *
 *   npm run keys -- list   [--json]
 *   npm run keys -- revoke <kid> [--reason "why"] [--json]
 *
 * `revoke` is the emergency revocation of a leaked key: it leaves identity's JWKS at once and
 * never signs again (if it was signing, the answer names the successor that signs from now on);
 * every token it signed stops verifying at every sidecar within seconds (README, "Revoking a
 * signing key"). Reads IDENTITY_URL (default http://127.0.0.1:8083) and IDENTITY_ADMIN_TOKEN from
 * the environment; an unset IDENTITY_ADMIN_TOKEN is read from `npm start`'s `<DATA_DIR>/secrets.env`.
 *
 * Exit status: 0 done (also for a key revoked before); 1 the call failed (one line on stderr, e.g.
 * `keys: 404 not_found: no such signing key`); 2 bad usage or configuration.
 */
import { loadCliConfig, parseCommandLine, runCli, UsageError } from './cli.js';
import { keysCliConfig } from './config.js';

const USAGE = `usage: npm run keys -- <list|revoke> [flags]
  list                          every signing key: state (pending, signing, verifying, retired, revoked) and schedule
  revoke <kid> [--reason TEXT]  emergency revocation: out of the JWKS now, never signs again
  --json                        print the API's JSON answer`;

const OPTIONS = {
  reason: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

interface KeyView {
  kid: string;
  alg: string;
  state: string;
  created_at: string;
  activate_at: string;
  retire_at: string | null;
  revoked_at: string | null;
  revoked_reason: string | null;
}

async function call(url: string, token: string, init: RequestInit = {}): Promise<unknown> {
  const res = await fetch(url, {
    ...init,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    signal: AbortSignal.timeout(30_000),
  });
  const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${res.status} ${String(body.code ?? '')}: ${String(body.detail ?? res.statusText)}`);
  return body;
}

/**
 * A kid is base64url and may start with '-' (one in 32 does), which parseArgs would read as a
 * short option: the word after `revoke` is the kid whenever it is not one of our flags, so
 * `revoke -0Rk…` works without the user knowing to write `--` first.
 */
function literalKid(argv: string[]): string[] {
  const at = argv.indexOf('revoke');
  const next = argv[at + 1];
  if (at < 0 || next === undefined || !next.startsWith('-') || next === '--') return argv;
  const flag = next.replace(/^--?/, '').split('=')[0]!;
  if (flag in OPTIONS || Object.values(OPTIONS).some((o) => 'short' in o && o.short === flag)) return argv;
  return [...argv.slice(0, at + 1), ...argv.slice(at + 2), '--', next];
}

async function main(argv: string[]): Promise<number> {
  const { values: flags, positionals } = parseCommandLine(literalKid(argv), OPTIONS);
  if (flags.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [command, kid, ...extra] = positionals;
  if (command !== 'list' && command !== 'revoke') throw new UsageError('a command is required: list or revoke');
  if (command === 'revoke' && kid === undefined) throw new UsageError('revoke needs the kid of the key');
  if (command === 'list' && kid !== undefined) throw new UsageError(`unexpected argument: ${kid}`);
  if (extra.length > 0) throw new UsageError(`unexpected argument: ${extra[0]}`);
  if (command === 'list' && flags.reason !== undefined) throw new UsageError('--reason is for revoke');

  const config = loadCliConfig(keysCliConfig);
  if (!config.IDENTITY_ADMIN_TOKEN)
    throw new UsageError('set IDENTITY_ADMIN_TOKEN (the admin token identity runs with; npm start keeps its own in .data/secrets.env)');
  const base = `${config.IDENTITY_URL.replace(/\/+$/, '')}/auth/admin/keys`;

  if (command === 'list') {
    const body = (await call(base, config.IDENTITY_ADMIN_TOKEN)) as { keys: KeyView[] };
    if (flags.json) process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    else
      for (const k of body.keys) {
        const revoked = k.revoked_at ? `  revoked ${k.revoked_at}${k.revoked_reason ? ` (${k.revoked_reason})` : ''}` : '';
        process.stdout.write(`${k.kid}  ${k.alg}  ${k.state.padEnd(9)}  signs from ${k.activate_at}${revoked}\n`);
      }
    return 0;
  }
  const body = (await call(`${base}/${encodeURIComponent(kid!)}/revoke`, config.IDENTITY_ADMIN_TOKEN, {
    method: 'POST',
    body: JSON.stringify(flags.reason === undefined ? {} : { reason: flags.reason }),
  })) as { kid: string; revoked_at: string; already_revoked: boolean; successor: { kid: string; how: string } | null };
  if (flags.json) process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
  else if (body.already_revoked) process.stdout.write(`${body.kid} was already revoked at ${body.revoked_at}\n`);
  else {
    const next = body.successor ? `; ${body.successor.kid} signs from now on (${body.successor.how})` : '';
    process.stdout.write(`${body.kid} revoked at ${body.revoked_at}${next}\n`);
  }
  return 0;
}

runCli(
  'keys',
  USAGE,
  () => main(process.argv.slice(2)),
  (err) => {
    const cause = err instanceof Error && err.cause instanceof Error ? ` (${err.cause.message})` : '';
    return `${err instanceof Error ? err.message.split('\n')[0]! : String(err)}${cause}`;
  },
);
