/**
 * `npm start`: the whole platform on one machine. Starts an embedded PostgreSQL when DATABASE_URL
 * is unset (data under DATA_DIR, `.data/`, kept across restarts), then each service as its own
 * process under the supervisor, waits until every one answers /readyz, and prints the URLs.
 *
 * Secrets nobody configured (the admin tokens, the service and tracking secrets) are generated once
 * into DATA_DIR/secrets.env and reused on every restart (shared/secrets-file.ts), where the CLIs
 * read them. Moved ports move the addresses the services find each other at (IDENTITY_URL,
 * NOTIFIER_URL, the sandbox's), so a second platform runs beside a first with its own port
 * variables and DATA_DIR (as the README test does).
 *
 * Stopping: SIGINT, SIGTERM or SIGHUP (to this process, to npm, which forwards it here since the
 * script `exec`s node, or to the whole process group) stops the services, then the database,
 * once however many of them arrive; so does the death of whatever started us (npm, a shell, a CI
 * runner: its pid is polled, as Linux gives Node no parent-death signal), and a signal that comes
 * while the database is still starting. The services themselves exit when this process dies even
 * by SIGKILL (their IPC channel to the supervisor closes); only the database would survive that,
 * and the next start names it (see shared/postmaster-lock.ts).
 */
import { createHash } from 'node:crypto';
import { join, relative } from 'node:path';
import { loadConfig } from '../shared/config.js';
import { startConfig } from './config.js';
import { createLogger } from '../shared/log.js';
import { describeStartupError, EXIT_CONFIG, watchParent } from '../shared/lifecycle.js';
import { isCodedError } from '../shared/errors.js';
import { PROJECT_ROOT } from '../shared/paths.js';
import { dataDirPath, ensureSecrets, secretsPath } from '../shared/secrets-file.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../shared/embedded-postgres.js';
import { Supervisor } from './supervisor.js';
import { shipTemplates } from '../identity/notify/templates.js';
import { ensureConsoleClient } from '../console/registration.js';
import { SANDBOX_TOPIC_ARN } from '../sandbox/sns.js';

const spec = startConfig;

type Name = 'control-plane' | 'limiter' | 'notifier' | 'identity' | 'sandbox' | 'console';

const say = (line: string): void => void process.stdout.write(line + '\n');

async function main(): Promise<void> {
  const config = loadConfig(spec);
  const log = createLogger({ service: 'start', level: config.LOG_LEVEL });
  const host = config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST;

  // What each service is, where its readiness and public URLs are. Upstreams start before the
  // sidecar that routes to them; the supervisor stops them in reverse.
  const catalogue: Record<Name, { script: string; ready: string; urls: Record<string, string> }> = {
    'control-plane': {
      script: 'dist/limiter/control-plane/main.js',
      ready: `http://${host}:${config.CONTROL_PLANE_HTTP_PORT}/readyz`,
      urls: { 'control plane (internal HTTP)': `http://${host}:${config.CONTROL_PLANE_HTTP_PORT}` },
    },
    identity: {
      script: 'dist/identity/main.js',
      ready: `http://${host}:${config.IDENTITY_PORT}/readyz`,
      urls: { identity: `http://${host}:${config.IDENTITY_PORT}` },
    },
    notifier: {
      script: 'dist/notifier/main.js',
      ready: `http://${host}:${config.NOTIFIER_PORT}/readyz`,
      urls: { notifier: `http://${host}:${config.NOTIFIER_PORT}` },
    },
    sandbox: {
      script: 'dist/sandbox/main.js',
      ready: `http://${host}:${config.SANDBOX_PORT}/readyz`,
      urls: { 'sandbox providers': `http://${host}:${config.SANDBOX_PORT}` },
    },
    limiter: {
      script: 'dist/limiter/main.js',
      ready: `http://${host}:${config.LIMITER_ADMIN_PORT}/readyz`,
      urls: {
        'sidecar (send traffic here)': `http://${host}:${config.LIMITER_PORT}`,
        'sidecar admin (/metrics)': `http://${host}:${config.LIMITER_ADMIN_PORT}`,
      },
    },
    console: {
      script: 'dist/console/main.js',
      ready: `http://${host}:${config.CONSOLE_PORT}/readyz`,
      urls: { 'operator console (browser)': config.CONSOLE_PUBLIC_URL },
    },
  };
  const order: Name[] = ['control-plane', 'identity', 'sandbox', 'notifier', 'limiter', 'console'];
  const names = order.filter((n) => config.START_SERVICES.includes(n));

  // Stopping is wired before anything starts, so a signal during the database's start still stops
  // it. Everything is stopped once: later signals (npm forwards the one the group also delivered)
  // find `stopping` set.
  const supervisor = new Supervisor({ giveUpCodes: [EXIT_CONFIG] });
  let pgStarting: Promise<EmbeddedPostgres | undefined> | undefined;
  let stopping = false;
  const stop = async (code: number, why?: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    say(why ? `stopping (${why})…` : 'stopping…');
    await supervisor.stop();
    const pg = await pgStarting?.catch(() => undefined);
    await pg?.stop();
    process.exit(code);
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void stop(0));
  watchParent({ pollMs: 1000, onGone: (reason) => void stop(0, reason) });

  // The secrets this platform runs with when the environment names none: generated once into the
  // data directory (mode 0600), reused on every restart, printed only when created. The CLIs read
  // the same file (shared/secrets-file.ts). A variable set in the environment wins.
  const secretsFile = secretsPath(config.DATA_DIR);
  const wanted: Record<string, number> = {};
  if (config.ADMIN_TOKEN === undefined) wanted.ADMIN_TOKEN = 24;
  if (config.IDENTITY_ADMIN_TOKEN === undefined) wanted.IDENTITY_ADMIN_TOKEN = 32;
  if (config.SERVICE_SECRET === undefined) wanted.SERVICE_SECRET = 24;
  if (config.NOTIFIER_TRACKING_SECRET === undefined) wanted.NOTIFIER_TRACKING_SECRET = 24;
  const secrets = ensureSecrets(secretsFile, wanted);
  const shownPath = relative(process.cwd(), secretsFile).startsWith('..') ? secretsFile : relative(process.cwd(), secretsFile);

  let pg: EmbeddedPostgres | undefined;
  let databaseUrl = config.DATABASE_URL;
  if (!databaseUrl) {
    say('starting embedded PostgreSQL…');
    const pgDir = dataDirPath(config.EMBEDDED_PG_DIR ?? join(config.DATA_DIR, 'postgres'));
    pgStarting = startEmbeddedPostgres({ dataDir: pgDir, port: config.EMBEDDED_PG_PORT, log });
    pg = await pgStarting;
    if (stopping || !pg) return; // stop() stops it
    databaseUrl = pg.url;
  }

  supervisor.on('restart', (name, delay, n) => say(`${name} exited; restart #${n} in ${delay} ms`));
  supervisor.on('giveUp', (name) => {
    say(`${name} stopped with a configuration error (see above); stopping the platform`);
    void stop(1);
  });

  // The sidecar follows the control plane when both run here (unless told otherwise).
  const limiterEnv: Record<string, string> = {};
  // The admin token serves the quota CLI and the internal HTTP API. The sidecar vouches for callers
  // upstream with X-Subject and the service secret; the notifier and identity trust X-Subject only
  // with it. identity's admin token registers the console's OAuth client below (and serves `npm run keys`).
  const adminToken = config.ADMIN_TOKEN ?? secrets.values.ADMIN_TOKEN!;
  const serviceSecret = config.SERVICE_SECRET ?? secrets.values.SERVICE_SECRET!;
  const trackingSecret = config.NOTIFIER_TRACKING_SECRET ?? secrets.values.NOTIFIER_TRACKING_SECRET!;
  const identityAdminToken = config.IDENTITY_ADMIN_TOKEN ?? secrets.values.IDENTITY_ADMIN_TOKEN!;
  if (names.includes('control-plane') && !config.LIMITER_CONTROL_PLANE_URL && !config.LIMITER_QUOTA_FILE) {
    limiterEnv.LIMITER_CONTROL_PLANE_URL = `${host}:${config.CONTROL_PLANE_GRPC_PORT}`;
  }
  // Where the services find each other, from the ports this run uses: moved ports (LIMITER_PORT=…,
  // as the README test does to stay clear of a running platform) must move every address that
  // defaults to them. An address the environment names is left to the child, which reads it.
  const wiring: Record<string, string> = {};
  const unlessSet = (name: string, value: string): void => {
    if (process.env[name] === undefined) wiring[name] = value;
  };
  if (names.includes('identity')) unlessSet('IDENTITY_URL', `http://${host}:${config.IDENTITY_PORT}`);
  if (names.includes('notifier')) unlessSet('NOTIFIER_URL', `http://${host}:${config.NOTIFIER_PORT}`);
  // The console's overview scrapes the sidecar's admin port, wherever this run put it.
  if (names.includes('limiter')) unlessSet('CONSOLE_SIDECAR_METRICS_URL', `http://${host}:${config.LIMITER_ADMIN_PORT}/metrics`);
  if (names.includes('sandbox')) {
    unlessSet('FCM_URL', `http://${host}:${config.SANDBOX_PORT}`);
    unlessSet('SMS_URL', `http://${host}:${config.SANDBOX_PORT}`);
    unlessSet('SMTP_URL', `smtp://${host}:${config.SANDBOX_SMTP_PORT ?? config.SANDBOX_PORT + 1}`);
  }
  const spawnEnv = (name: Name): Record<string, string> => ({
    ...wiring,
    DATABASE_URL: databaseUrl,
    SERVICE_SECRET: serviceSecret,
    ...(name === 'limiter' ? limiterEnv : {}),
    ...(name === 'control-plane' ? { ADMIN_TOKEN: adminToken } : {}),
    ...(name === 'notifier' ? { NOTIFIER_TRACKING_SECRET: trackingSecret } : {}),
    // Identity's notification relay goes through this run's sidecar, wherever LIMITER_PORT put
    // it, unless the environment names another address (the child reads it then).
    ...(name === 'identity' && process.env['IDENTITY_NOTIFY_URL'] === undefined
      ? { IDENTITY_NOTIFY_URL: `http://${host}:${config.LIMITER_PORT}` }
      : {}),
    // Provider feedback (notifier/feedback): the sandbox posts its SES events and Twilio status
    // callbacks to the notifier through this run's sidecar (the SMS callback URL is built on
    // NOTIFIER_PUBLIC_URL, the sidecar's origin), and the notifier fetches the sandbox's SNS
    // certificate over plain http from the sandbox's address only.
    ...(name === 'sandbox' && process.env['SANDBOX_SNS_ENDPOINT'] === undefined
      ? { SANDBOX_SNS_ENDPOINT: `http://${host}:${config.LIMITER_PORT}/api/v1/webhooks/ses` }
      : {}),
    ...(name === 'notifier' && names.includes('sandbox') && process.env['NOTIFIER_SNS_CERT_HTTP_HOSTS'] === undefined
      ? { NOTIFIER_SNS_CERT_HTTP_HOSTS: `${host}:${config.SANDBOX_PORT}` }
      : {}),
    // The notifier takes SNS messages only from topics it is told (unset: none); here, the sandbox's.
    ...(name === 'notifier' && names.includes('sandbox') && process.env['NOTIFIER_SES_TOPIC_ARNS'] === undefined
      ? { NOTIFIER_SES_TOPIC_ARNS: SANDBOX_TOPIC_ARN }
      : {}),
    ...(name === 'notifier' && process.env['NOTIFIER_PUBLIC_URL'] === undefined
      ? { NOTIFIER_PUBLIC_URL: `http://${host}:${config.LIMITER_PORT}` }
      : {}),
    ...(name === 'identity' ? { IDENTITY_ADMIN_TOKEN: identityAdminToken } : {}),
    // The console calls each service directly, with the operator's token.
    ...(name === 'console'
      ? {
          IDENTITY_URL: `http://${host}:${config.IDENTITY_PORT}`,
          NOTIFIER_URL: `http://${host}:${config.NOTIFIER_PORT}`,
          CONSOLE_CONTROL_PLANE_URL: `http://${host}:${config.CONTROL_PLANE_HTTP_PORT}`,
        }
      : {}),
  });
  const spawn = (name: Name, extra: Record<string, string> = {}): void =>
    supervisor.add({
      name,
      command: process.execPath,
      args: ['--enable-source-maps', join(PROJECT_ROOT, catalogue[name].script)],
      env: { ...spawnEnv(name), ...extra },
    });
  // The console starts last: its OAuth client is registered at identity first (below).
  for (const name of names) if (name !== 'console') spawn(name);

  const deadline = Date.now() + config.START_READY_TIMEOUT;
  const pending = new Set<Name>(names.filter((n) => n !== 'console'));
  const waitReady = async (): Promise<void> => {
    while (pending.size > 0 && Date.now() < deadline && !stopping) {
      await Promise.all(
        [...pending].map(async (n) => {
          try {
            const r = await fetch(catalogue[n].ready, { signal: AbortSignal.timeout(1000) });
            if (r.ok) pending.delete(n);
          } catch {
            // not up yet
          }
        }),
      );
      if (pending.size > 0) await new Promise((r) => setTimeout(r, 250));
    }
  };
  await waitReady();
  if (stopping) return;
  if (pending.size === 0 && names.includes('console')) {
    // The console's client at identity (a new secret each start), then the console with it.
    const identityUrl =
      process.env['IDENTITY_URL'] && !names.includes('identity') ? process.env['IDENTITY_URL'] : `http://${host}:${config.IDENTITY_PORT}`;
    try {
      const { clientSecret } = await ensureConsoleClient({
        identityUrl,
        adminToken: identityAdminToken,
        clientId: config.CONSOLE_CLIENT_ID,
        redirectUri: `${config.CONSOLE_PUBLIC_URL}/auth/callback`,
      });
      spawn('console', { CONSOLE_CLIENT_SECRET: clientSecret });
      pending.add('console');
      await waitReady();
      if (stopping) return;
    } catch (err) {
      say(`could not register the console at identity: ${err instanceof Error ? err.message : String(err)}`);
      await stop(1);
      return;
    }
  }
  if (pending.size > 0) {
    say(`not ready after ${config.START_READY_TIMEOUT / 1000} s: ${[...pending].join(', ')}`);
    await stop(1);
    return;
  }
  // The templates identity's notifications use (welcome, security alerts), so a fresh platform
  // sends them: PUT to the notifier as a service caller vouched for with the shared secret, the way
  // the sidecar would. Idempotent: the identical definition again is a 200, even once used.
  if (names.includes('notifier')) {
    const headers = {
      'x-subject': `key:${createHash('sha256').update('npm-start').digest('hex')}`,
      'x-subject-role': 'service',
      'x-subject-secret': serviceSecret,
    };
    try {
      const shipped = await shipTemplates(`http://${host}:${config.NOTIFIER_PORT}`, headers);
      log.info({ templates: shipped }, 'notifier templates shipped');
    } catch (err) {
      say(`could not ship the notifier templates: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  say('\nthe platform is ready:');
  for (const n of names) for (const [what, url] of Object.entries(catalogue[n].urls)) say(`  ${what.padEnd(30)} ${url}`);
  if (pg) say(`  ${'embedded PostgreSQL'.padEnd(30)} ${pg.url.replace(/\/\/([^:]+):[^@]*@/, '//$1:***@')}`);
  if (names.includes('control-plane')) say(`  ${'control plane gRPC'.padEnd(30)} ${host}:${config.CONTROL_PLANE_GRPC_PORT}`);
  if (secrets.created.length > 0) {
    // Printed this once; afterwards the file is where they are.
    say(`\ngenerated secrets, kept in ${shownPath} (mode 0600) and read from there by npm run quota, keys:`);
    for (const name of secrets.created) say(`  ${name}=${secrets.values[name]}`);
  } else if (Object.keys(secrets.values).length > 0) {
    say(`\nsecrets: ${shownPath} (${Object.keys(secrets.values).join(', ')})`);
  }
  say('\nCtrl-C stops everything.');
}

main().catch((err: unknown) => {
  process.stderr.write(`npm start: ${describeStartupError(err)}\n`);
  process.exit(isCodedError(err) && err.code === 'config_variable_invalid' ? EXIT_CONFIG : 1);
});
