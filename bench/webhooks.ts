/**
 * The provider webhooks benchmark (issue 15): how fast the notifier absorbs a flood of signed
 * callbacks. Starts what it measures in this process: a notifier (workers off: only the API and
 * the feedback writer run) over a fresh database on DATABASE_URL (default the local
 * postgres://postgres@127.0.0.1:5432/postgres; dropped at the end), and the sandbox, whose SNS
 * topic signs the SES events and serves its certificate.
 *
 *   (t) Twilio status callbacks: `--events` distinct signed callbacks (HMAC-SHA1), all at once over
 *       `--connections` keep-alive connections (autocannon, `amount`);
 *   (s) SES events through SNS: `--ses-events` distinct envelopes signed with RSA (SignatureVersion
 *       1), the certificate fetched once and cached;
 *   peer: the same Twilio flood with the writer at one event per transaction (what a handler that
 *       writes each callback on its own would do), against the batched writer (500 per transaction).
 *
 * Every run checks that each event was stored exactly once. Writes the "## Provider webhooks
 * (issue 15)" section of bench/RESULTS.md (`--no-write` to skip).
 *
 *   npx tsc -b && node dist/bench/webhooks.js [--events 20000] [--ses-events 5000] [--connections 100] [--no-write]
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loadConfig } from '../shared/config.js';
import { createLogger } from '../shared/log.js';
import { PROJECT_ROOT } from '../shared/paths.js';
import { startNotifier } from '../notifier/app.js';
import { notifierConfig } from '../notifier/config.js';
import { SANDBOX_TOPIC_ARN, startSandbox } from '../sandbox/app.js';
import { replaceSection } from './lib/report.js';

const { values: argv } = parseArgs({
  options: {
    events: { type: 'string', default: '20000' },
    'ses-events': { type: 'string', default: '5000' },
    connections: { type: 'string', default: '100' },
    'no-write': { type: 'boolean', default: false },
  },
});
const EVENTS = Number(argv.events);
const SES_EVENTS = Number(argv['ses-events']);
const CONNECTIONS = Number(argv.connections);
const TOKEN = 'bench-sms-token';
const PUBLIC = 'http://edge.bench';

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  errors: number;
  non2xx: number;
  duration: number;
}
type Client = { setHeadersAndBody(h: Record<string, string>, b: string): void; on(e: string, f: () => void): void };
type Autocannon = (opts: Record<string, unknown>, cb: (err: Error | null, r: AutocannonResult) => void) => unknown;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

interface Row {
  scenario: string;
  events: number;
  eventsPerSecond: number;
  p50: number;
  p99: number;
  failed: number;
  stored: number;
}

/** Posts each request once, all at once over CONNECTIONS connections. */
function flood(url: string, requests: { headers: Record<string, string>; body: string }[]): Promise<AutocannonResult> {
  let next = 0;
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url,
        method: 'POST',
        connections: CONNECTIONS,
        amount: requests.length,
        timeout: 30,
        setupClient: (client: Client) => {
          const set = (): void => {
            const r = requests[next++ % requests.length]!;
            client.setHeadersAndBody(r.headers, r.body);
          };
          set();
          client.on('response', set);
        },
      },
      (err, r) => (err ? reject(err) : resolve(r)),
    );
  });
}

function twilioRequests(n: number, tag: string): { headers: Record<string, string>; body: string }[] {
  const url = `${PUBLIC}/api/v1/webhooks/twilio`;
  return Array.from({ length: n }, (_, i) => {
    const params: [string, string][] = [
      ['AccountSid', 'ACbench'],
      ['MessageSid', `SM${tag}${i.toString().padStart(8, '0')}`],
      ['MessageStatus', 'delivered'],
    ];
    const data = url + params.map(([k, v]) => k + v).join('');
    return {
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-twilio-signature': createHmac('sha1', TOKEN).update(data).digest('base64'),
      },
      body: new URLSearchParams(params).toString(),
    };
  });
}

async function main(): Promise<void> {
  const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const log = createLogger({ service: 'bench', level: 'warn' });
  const sandbox = await startSandbox({ credentials: { smsAuthToken: TOKEN } });
  const rows: Row[] = [];
  const run = async (label: string, batch: number, fn: (url: string, db: pg.Pool) => Promise<Row>): Promise<void> => {
    const name = `bench_webhooks_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    const u = new URL(adminUrl);
    u.pathname = `/${name}`;
    const config = loadConfig(notifierConfig, {
      ...process.env,
      DATABASE_URL: u.toString(),
      NOTIFIER_PORT: '0',
      NOTIFIER_WORKERS: 'false',
      NOTIFIER_PUBLIC_URL: PUBLIC,
      SMS_AUTH_TOKEN: TOKEN,
      NOTIFIER_SNS_CERT_HTTP_HOSTS: `127.0.0.1:${sandbox.port}`,
      NOTIFIER_SES_TOPIC_ARNS: SANDBOX_TOPIC_ARN,
      LOG_LEVEL: 'warn',
    });
    const notifier = await startNotifier(config, log, { feedbackBatch: batch });
    try {
      process.stdout.write(`${label}…\n`);
      rows.push(await fn(`http://127.0.0.1:${notifier.port}`, notifier.pool));
    } finally {
      await notifier.close();
      await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
      await admin.end();
    }
  };
  const stored = async (db: pg.Pool, provider: string): Promise<number> =>
    (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM provider_events WHERE provider = $1', [provider])).rows[0]!.n;
  const row = (scenario: string, n: number, r: AutocannonResult, s: number): Row => ({
    scenario,
    events: n,
    eventsPerSecond: r.requests.total / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    failed: r.errors + r.non2xx,
    stored: s,
  });

  await run('(t) Twilio callbacks, batched writer', 500, async (url, db) => {
    const r = await flood(`${url}/api/v1/webhooks/twilio`, twilioRequests(EVENTS, 'b'));
    return row('(t) Twilio callbacks, batched writer (500 per transaction)', EVENTS, r, await stored(db, 'twilio'));
  });
  await run('(peer) Twilio callbacks, one transaction per event', 1, async (url, db) => {
    const r = await flood(`${url}/api/v1/webhooks/twilio`, twilioRequests(EVENTS, 'p'));
    return row('(peer) Twilio callbacks, one event per transaction', EVENTS, r, await stored(db, 'twilio'));
  });
  await run('(s) SES events through SNS, batched writer', 500, async (url, db) => {
    const bodies = Array.from({ length: SES_EVENTS }, (_, i) => ({
      headers: { 'content-type': 'text/plain; charset=UTF-8' },
      body: JSON.stringify(
        sandbox.feedback.sns.envelope({
          Type: 'Notification',
          Message: JSON.stringify({ eventType: 'Delivery', mail: { messageId: `bench-${i}` }, delivery: { recipients: ['a@b.c'] } }),
        }),
      ),
    }));
    const r = await flood(`${url}/api/v1/webhooks/ses`, bodies);
    return row('(s) SES events through SNS (RSA-SHA1), batched writer', SES_EVENTS, r, await stored(db, 'ses'));
  });
  await sandbox.close();

  const table = [
    '| scenario | events | events/s | p50 ms | p99 ms | failed | stored once |',
    '|---|---:|---:|---:|---:|---:|---|',
    ...rows.map(
      (r) =>
        `| ${r.scenario} | ${r.events.toLocaleString('en')} | ${Math.round(r.eventsPerSecond).toLocaleString('en')} | ${r.p50} | ${r.p99} | ${r.failed} | ${r.stored === r.events ? 'yes' : `no (${r.stored})`} |`,
    ),
  ].join('\n');
  process.stdout.write(`\n${table}\n`);
  if (argv['no-write']) return;
  const file = resolve(PROJECT_ROOT, 'bench/RESULTS.md');
  const body = `Run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')} on ${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown'}), node ${process.version}; 1-minute load average at the end ${loadavg()[0]!.toFixed(2)}.

Command: \`node dist/bench/webhooks.js --events ${EVENTS} --ses-events ${SES_EVENTS} --connections ${CONNECTIONS}\`. The notifier runs in the bench process with workers off (API and feedback writer only), against a fresh database on the local PostgreSQL; autocannon (same process) posts every distinct signed event once, all at once over ${CONNECTIONS} keep-alive connections; events/s is the events over the flood's duration; latency is per webhook, from the post to its 200 (answered once its batch committed). The events name messages the database does not hold (answered \`unknown\`, stored and counted), so the figure is the write path, signatures included; "stored once" checks every event is in \`provider_events\` exactly once.

${table}

The peer is the same notifier with the writer at one event per transaction: what writing each callback on its own costs. The batched writer uses one pool connection whatever the flood, so delivery workers keep the rest (test/notifier/feedback/flood.test.ts checks sends complete during a 10,000-callback flood).`;
  const text = readFileSync(file, 'utf8');
  writeFileSync(file, replaceSection(text, '## Provider webhooks (issue 15)', body).replace(/\n*$/, '\n'));
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
