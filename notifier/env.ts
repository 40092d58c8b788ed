/**
 * The environment variables read only by the notifier (notifier/main.ts): default, meaning, parser. The README's
 * configuration table is generated from these declarations and shared/env.ts (bin/env-catalogue.ts)
 * and checked both ways by test/shared/config.test.ts. Add a variable here, then to the README.
 */
import { bool, bytes, duration, durationIn, int, list, nonEmpty, num, oneOf, port, url, v, type VarSpec } from '../shared/config.js';
import { DEFAULT_NOTIFICATION_TYPES, parseTypeCatalog } from './policy/types.js';

/** A provider's name (the `*_RAMP_NAME`s): it labels metrics and delivery records. */
function providerName(raw: string): string {
  if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(raw)) throw new Error('must be a provider name: lower-case letters, digits, - and _, at most 32');
  return raw;
}

/** `transactional=32,high=64,normal=32,low=16`: a value per notifier priority tier, every tier named once. */
function tierMap<T>(raw: string, item: (s: string) => T): Record<'transactional' | 'high' | 'normal' | 'low', T> {
  const out: Partial<Record<string, T>> = {};
  for (const part of raw
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '')) {
    const m = /^(transactional|high|normal|low)=(.+)$/.exec(part);
    if (!m) throw new Error(`"${part}" is not tier=value (tiers: transactional, high, normal, low)`);
    if (m[1]! in out) throw new Error(`${m[1]} is given twice`);
    try {
      out[m[1]!] = item(m[2]!.trim());
    } catch (err) {
      throw new Error(`${m[1]}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  for (const t of ['transactional', 'high', 'normal', 'low']) if (!(t in out)) throw new Error(`must give a value for ${t}`);
  return out as Record<'transactional' | 'high' | 'normal' | 'low', T>;
}

export const NOTIFIER_ENV = {
  // ── ports ─────────────────────────────────────────────────────────────────
  NOTIFIER_PORT: v({
    default: '8082',
    services: ['notifier', 'start'],
    description: 'Notifier HTTP API and /metrics, /healthz, /readyz',
    parse: port,
  }),
  // ── notifier (core: ingestion, queues, workers, tracking) ─────────────────
  NOTIFIER_WORKERS: v({
    default: 'true',
    services: ['notifier'],
    description: 'Run the routing and delivery workers in this process; false serves the HTTP API only (scale the two apart)',
    parse: bool,
  }),
  NOTIFIER_IDEMPOTENCY_TTL: v({
    default: '24h',
    services: ['notifier'],
    description: "How long a caller's `idempotency_key` is remembered: a repeat within it gets the original 202",
    parse: duration,
  }),
  NOTIFIER_RETRY_SCHEDULE: v({
    default: '1s,5s,30s,2m,10m',
    services: ['notifier'],
    description: 'Delays before each retry of a failed send; after the last, the delivery goes to the dead-letter queue of its channel',
    parse: (raw) => {
      const out = list(duration)(raw);
      if (out.length === 0 || out.length > 20) throw new Error('must list 1 to 20 durations');
      return out;
    },
  }),
  NOTIFIER_CONCURRENCY: v({
    default: 'transactional=32,high=64,normal=32,low=16',
    services: ['notifier'],
    description:
      'Sends in flight per queue (each channel × tier delivery queue, and the routing queue of each tier), by tier; with N in flight and a provider taking L seconds, one queue sends at most N / L per second',
    parse: (raw) => tierMap(raw, int(1, 1000)),
  }),
  NOTIFIER_IDLE_POLL: v({
    default: 'transactional=50ms,high=200ms,normal=1s,low=2s',
    services: ['notifier'],
    description:
      'How often the queues of each tier are polled for due work another process enqueued, a retry or a delayed send (one statement per period for all the queues of a tier; work enqueued by this process wakes its queue at once)',
    parse: (raw) =>
      tierMap(raw, (s) => {
        const ms = duration(s);
        if (ms < 10 || ms > 60_000) throw new Error('must be between 10ms and 60s');
        return ms;
      }),
  }),
  NOTIFIER_SEND_TIMEOUT: v({
    default: '10s',
    services: ['notifier'],
    description: 'Deadline of one provider call; a delivery left `sending` for twice this (at most this plus 5 s) counts as a crashed send',
    parse: duration,
  }),
  NOTIFIER_JOB_EXPIRE: v({
    default: '60s',
    services: ['notifier'],
    description: 'A queue job held by a worker this long without completing (the worker died) is handed out again',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 1000) throw new Error('must be at least 1s');
      return ms;
    },
  }),
  NOTIFIER_QUEUE_MAINTENANCE: v({
    default: '30s',
    services: ['notifier'],
    description: 'How often pg-boss maintenance runs (re-queues expired jobs of crashed workers, archives finished ones)',
    parse: (raw) => {
      const ms = duration(raw);
      if (ms < 1000) throw new Error('must be at least 1s');
      return ms;
    },
  }),
  NOTIFIER_RECONCILE_INTERVAL: v({
    default: '60s',
    services: ['notifier'],
    description: 'How often the reconciler looks for notifications and deliveries whose queue wake-up was lost, and sends another',
    parse: (raw) => durationIn(raw, 1000, 3_600_000, '1s', '1h'),
  }),
  NOTIFIER_RECONCILE_GRACE: v({
    default: '2m',
    services: ['notifier'],
    description: 'How long a delivery must have been due (or a notification unrouted) before the reconciler replaces a lost wake-up',
    parse: (raw) => durationIn(raw, 1000, 86_400_000, '1s', '1d'),
  }),
  NOTIFIER_BACKPRESSURE_THRESHOLD: v({
    default: '500',
    services: ['notifier'],
    description: 'Ready transactional and high jobs above which `low` sends are deferred (twice this defers `normal` too)',
    parse: int(1, 10_000_000),
  }),
  NOTIFIER_RETENTION: v({
    default: '90d',
    services: ['notifier'],
    description: 'Notifications, delivery records, dead letters and inbox items older than this are deleted',
    parse: duration,
  }),
  NOTIFIER_RETENTION_SCHEDULE: v({
    default: '17 3 * * *',
    services: ['notifier'],
    description: 'Cron schedule (UTC) of the retention job, a scheduled pg-boss job',
    parse: (raw) => {
      if (raw.trim().split(/\s+/).length !== 5) throw new Error('must be a 5-field cron expression');
      return raw.trim();
    },
  }),
  NOTIFIER_TRACKING_SECRET: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['notifier', 'start'],
    description: 'HMAC key that signs open-pixel URLs; unset, a random key per process (links from before a restart stop counting)',
    parse: (raw) => {
      if (raw.length < 16) throw new Error('must be at least 16 characters');
      return raw;
    },
  }),
  NOTIFIER_PUBLIC_URL: v({
    default: 'http://127.0.0.1:8080',
    services: ['notifier'],
    description: 'Public origin of the API (the sidecar) used in links the notifier sends, such as the e-mail open pixel',
    parse: url(['http', 'https']),
  }),
  NOTIFIER_ADMIN_ROLES: v({
    default: 'admin',
    services: ['notifier'],
    description: 'Roles that may use the operator API under /api/v1/admin (dead-letter queue, segments)',
    parse: list(nonEmpty),
  }),
  NOTIFIER_SERVICE_ROLES: v({
    default: 'service,admin',
    services: ['notifier'],
    description: 'Roles that may send notifications and act for any user (API keys through the sidecar are `service`)',
    parse: list(nonEmpty),
  }),
  NOTIFIER_INBOX_PAGE_SIZE: v({
    default: '20',
    services: ['notifier'],
    description: 'Inbox items per page when the request gives no `limit` (at most 100)',
    parse: int(1, 100),
  }),
  NOTIFIER_SEGMENT_MAX_BYTES: v({
    default: '128mb',
    services: ['notifier'],
    description:
      'Largest segment upload (PUT /api/v1/admin/segments/{id}/members, read as a stream; 413 above it); other routes keep MAX_BODY_BYTES',
    parse: bytes,
  }),
  // ── notifier: provider webhooks (notifier/feedback) ─────────────────────────
  NOTIFIER_SNS_CERT_HOSTS: v({
    default: '^sns\\.[a-z0-9-]+\\.amazonaws\\.com(\\.cn)?$',
    services: ['notifier'],
    description:
      'Pattern (a regular expression) of the hosts an SNS SigningCertURL or SubscribeURL may name, fetched over https only; any other is refused unfetched',
    parse: (raw) => {
      try {
        return new RegExp(raw);
      } catch {
        throw new Error('must be a regular expression');
      }
    },
  }),
  NOTIFIER_SNS_CERT_HTTP_HOSTS: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'host:port list also allowed for SNS certificates and SubscribeURLs over plain http: the sandbox under npm start and tests; unset in production',
    parse: list(nonEmpty),
  }),
  NOTIFIER_SNS_CERT_TTL: v({
    default: '1h',
    services: ['notifier'],
    description: 'How long an SNS signing certificate is kept per URL before it is fetched again (never pinned: certificates rotate)',
    parse: duration,
  }),
  NOTIFIER_SES_TOPIC_ARNS: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      "SNS topic ARNs the SES events webhook accepts (comma-separated); any other topic is refused (403) and only these topics' subscriptions are confirmed. Unset: the webhook refuses every SNS message (said at start and in /readyz); `npm start` sets the sandbox's topic",
    parse: list(nonEmpty),
  }),
  NOTIFIER_SNS_MAX_AGE: v({
    default: '65m',
    services: ['notifier'],
    description:
      'Oldest SNS `Timestamp` the SES events webhook accepts (SNS retries an HTTP/S delivery for at most 3,600 s; the default adds 5 minutes of clock skew); older, or more than 5 minutes ahead of our clock, is refused (403)',
    parse: (raw) => durationIn(raw, 60_000, 86_400_000, '1m', '24h'),
  }),
  // ── notifier: policies ────────────────────────────────────────────────────
  NOTIFIER_NOTIFICATION_TYPES: v({
    default: 'default',
    services: ['notifier'],
    description:
      'The notification types, as JSON (inline, or the path of a file): per type its `events` patterns, default `channels`, `mandatory`, `sms`, `caps`, `digest` and `failover` (per failing channel, the channels a `high` or `transactional` delivery may fail over to, or `false`; default push → sms, then in_app; e-mail and sms → in_app) (README, "Notification types, preferences and policies" and "Failover"); `default` is the built-in catalogue shown there',
    parse: (raw) => parseTypeCatalog(raw.trim() === 'default' ? DEFAULT_NOTIFICATION_TYPES : raw),
  }),
  NOTIFIER_QUIET_HOURS_TIERS: v({
    default: 'normal',
    services: ['notifier'],
    description:
      "Tiers besides `low` (which always does) that hold sends during the user's quiet hours: `normal`, `high`, both, or `none`; `transactional` never does",
    parse: (raw) => (raw.trim() === 'none' ? [] : list(oneOf(['normal', 'high'] as const))(raw)),
  }),
  NOTIFIER_PREFERENCES_TTL: v({
    default: '30s',
    services: ['notifier'],
    description:
      "How long a replica caches a user's preferences for routing; a write on any replica drops them everywhere at once (LISTEN/NOTIFY), so this is only the backstop",
    parse: (raw) => durationIn(raw, 0, 3_600_000, '0', '1h'),
  }),
  NOTIFIER_PREFERENCES_TIMEOUT: v({
    default: '250ms',
    services: ['notifier'],
    description:
      'How long routing and the check before a send wait for the preference store before applying the conservative default (push only; e-mail and SMS held and checked again)',
    parse: (raw) => durationIn(raw, 10, 10_000, '10ms', '10s'),
  }),
  // ── notifier: campaigns (notifier/campaigns) ─────────────────────────────
  NOTIFIER_CAMPAIGN_SHARD_SIZE: v({
    default: '1000',
    services: ['notifier'],
    description: 'Members per fan-out shard: one queued job, one INSERT and one checkpoint each',
    parse: int(10, 100_000),
  }),
  NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD: v({
    default: '100000',
    services: ['notifier'],
    description:
      'An audience request whose segment has more members than this waits in `pending_approval` until an operator approves or rejects it (0: every one waits)',
    parse: int(0, Number.MAX_SAFE_INTEGER),
  }),
  NOTIFIER_CAMPAIGN_CONCURRENCY: v({
    default: '4',
    services: ['notifier'],
    description:
      'Campaign jobs (planning, shards) each replica runs at once, per tier; a shard spends half its time waiting on round trips and its commit, so twice the cores keeps the database busy',
    parse: int(1, 64),
  }),
  NOTIFIER_CAMPAIGN_QUEUE_DEPTH: v({
    default: '2000',
    services: ['notifier'],
    description:
      "Wake-ups the campaign pump keeps waiting per delivery queue: a campaign's deliveries are put on the queues at delivery speed, never all at once",
    parse: int(10, 1_000_000),
  }),
  NOTIFIER_CAMPAIGN_PUMP_IDLE: v({
    default: '1s',
    services: ['notifier'],
    description:
      "How often the campaign pump looks for due campaign deliveries when it found none (quiet-hours holds falling due, other replicas' shards)",
    parse: (raw) => durationIn(raw, 10, 60_000, '10ms', '1m'),
  }),
  NOTIFIER_CAMPAIGN_STOP_WAIT: v({
    default: '5s',
    services: ['notifier'],
    description: "How long a stop call waits for every live replica's acknowledgement before it answers with those it has",
    parse: (raw) => durationIn(raw, 0, 60_000, '0', '1m'),
  }),
  NOTIFIER_REPLICA_HEARTBEAT: v({
    default: '2s',
    services: ['notifier'],
    description: "Between a notifier replica's heartbeats; a replica silent for three is no longer waited for by a stop",
    parse: (raw) => durationIn(raw, 50, 60_000, '50ms', '1m'),
  }),
  // ── notifier: providers ───────────────────────────────────────────────────
  FCM_URL: v({
    default: 'http://127.0.0.1:8089',
    services: ['notifier'],
    description: 'Base URL of the push provider, FCM HTTP v1 (`https://fcm.googleapis.com`); the default is the sandbox',
    parse: url(['http', 'https']),
  }),
  FCM_PROJECT_ID: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      "Firebase project id, in the FCM path /v1/projects/{id}/messages:send; unset, the service-account key's `project_id`, else `sandbox-project`",
    parse: nonEmpty,
  }),
  FCM_TOKEN_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      "Where service-account assertions are exchanged for tokens; unset, the key file's `token_uri` (Google's); the sandbox's is `<sandbox>/token`",
    parse: url(['http', 'https']),
  }),
  FCM_SECONDARY_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description: 'Base URL of a secondary FCM v1 push provider for failover (same project and token); unset, none',
    parse: url(['http', 'https']),
  }),
  FCM_RAMP_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Base URL of a new FCM v1 push provider ramped in beside FCM_URL (same project and token), by the weights of the operator API (README, "Replacing a provider"); unset, none',
    parse: url(['http', 'https']),
  }),
  FCM_RAMP_NAME: v({
    default: 'fcm-ramp',
    services: ['notifier'],
    description: 'Name of the FCM_RAMP_URL provider in metrics, delivery records and the operator API',
    parse: providerName,
  }),
  SMTP_URL: v({
    default: 'smtp://127.0.0.1:8090',
    secret: true,
    services: ['notifier'],
    description: 'SMTP server for e-mail, `smtp://[user:password@]host:port` (`smtps://` for implicit TLS); the default is the sandbox',
    parse: url(['smtp', 'smtps']),
  }),
  SMTP_SECONDARY_URL: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['notifier'],
    description: 'A secondary SMTP server for failover, same form as SMTP_URL; unset, none',
    parse: url(['smtp', 'smtps']),
  }),
  SMTP_RAMP_URL: v({
    default: undefined,
    optional: true,
    secret: true,
    services: ['notifier'],
    description: 'A new SMTP server ramped in beside SMTP_URL, same form, by the weights of the operator API; unset, none',
    parse: url(['smtp', 'smtps']),
  }),
  SMTP_RAMP_NAME: v({
    default: 'smtp-ramp',
    services: ['notifier'],
    description: 'Name of the SMTP_RAMP_URL provider in metrics, delivery records and the operator API',
    parse: providerName,
  }),
  SMTP_FROM: v({
    default: 'Notifications <notifications@example.test>',
    services: ['notifier'],
    description: 'Sender of e-mails (From); its domain also ends every Message-ID (`<delivery id@domain>`)',
    parse: (raw) => {
      if (!/@[^@\s>]+/.test(raw)) throw new Error('must contain an e-mail address');
      return raw;
    },
  }),
  SMTP_POOL_SIZE: v({
    default: '16',
    services: ['notifier'],
    description:
      "Pooled SMTP connections per e-mail provider; each carries one message at a time, so this bounds the e-mail send rate (raise it with the e-mail queues' concurrency, within what the relay allows)",
    parse: int(1, 1000),
  }),
  SMS_URL: v({
    default: 'http://127.0.0.1:8089',
    services: ['notifier'],
    description: 'Base URL of the Twilio-style SMS API (`https://api.twilio.com`); the default is the sandbox',
    parse: url(['http', 'https']),
  }),
  SMS_SECONDARY_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description: 'Base URL of a secondary Twilio-style SMS provider for failover (same account); unset, none',
    parse: url(['http', 'https']),
  }),
  SMS_RAMP_URL: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Base URL of a new Twilio-style SMS provider ramped in beside SMS_URL (same account), by the weights of the operator API; unset, none',
    parse: url(['http', 'https']),
  }),
  SMS_RAMP_NAME: v({
    default: 'twilio-ramp',
    services: ['notifier'],
    description: 'Name of the SMS_RAMP_URL provider in metrics, delivery records and the operator API',
    parse: providerName,
  }),
  SMS_FROM: v({
    default: '+15005550006',
    services: ['notifier'],
    description: 'Sender phone number (From) of SMS',
    parse: nonEmpty,
  }),
  PROVIDER_CONNECTIONS: v({
    default: '32',
    services: ['notifier'],
    description: 'Keep-alive connections per HTTP provider (push, SMS); each provider has its own pool',
    parse: int(1, 10_000),
  }),
  PROVIDER_COSTS: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Cost of one accepted send per provider, `name=cost` comma-separated (e.g. `twilio=0.0079,twilio-ramp=0.0065`), counted in `provider_cost_total`; a provider not listed costs 0',
    parse: (raw) => {
      const out = new Map<string, number>();
      for (const [i, item] of raw
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '')
        .entries()) {
        const m = /^([a-z0-9][a-z0-9_-]{0,31})=(\d+(?:\.\d+)?)$/.exec(item);
        if (!m) throw new Error(`item ${i + 1}: must be name=cost, e.g. twilio=0.0079`);
        out.set(m[1]!, Number(m[2]));
      }
      return out;
    },
  }),
  NOTIFIER_RAMP_TEST_EMAILS: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Test addresses the shadow copies of e-mail go to during a provider ramp (comma-separated; never the user); unset, no e-mail shadow',
    parse: list((raw) => {
      if (!/^[^@\s]+@[^@\s]+$/.test(raw)) throw new Error('must be an e-mail address');
      return raw;
    }),
  }),
  NOTIFIER_RAMP_TEST_PHONES: v({
    default: undefined,
    optional: true,
    services: ['notifier'],
    description:
      'Test numbers (E.164) the shadow copies of SMS go to during a provider ramp (comma-separated; never the user); unset, no SMS shadow',
    parse: list((raw) => {
      if (!/^\+[1-9]\d{6,14}$/.test(raw)) throw new Error('must be an E.164 phone number');
      return raw;
    }),
  }),
  NOTIFIER_RAMP_POLL: v({
    default: '30s',
    services: ['notifier'],
    description: 'How often each replica rereads the provider weights without a NOTIFY (a missed one is caught up within this)',
    parse: duration,
  }),
  PROVIDER_CONNECT_TIMEOUT: v({
    default: '3s',
    services: ['notifier'],
    description: 'Connect (and SMTP greeting) timeout to a provider; the whole call is bounded by the send deadline',
    parse: duration,
  }),
  PROVIDER_BREAKER_THRESHOLD: v({
    default: '0.5',
    services: ['notifier'],
    description: 'Failure share of calls to one provider (errors, timeouts, throttling) that opens its circuit breaker',
    parse: num(0.01, 1),
  }),
  PROVIDER_BREAKER_MIN_VOLUME: v({
    default: '20',
    services: ['notifier'],
    description: "Calls in the window before a provider's failure share can open its breaker",
    parse: int(1, 1_000_000),
  }),
  PROVIDER_BREAKER_WINDOW: v({
    default: '10s',
    services: ['notifier'],
    description: 'Rolling window over which each provider breaker measures failures',
    parse: duration,
  }),
  PROVIDER_BREAKER_COOLDOWN: v({
    default: '15s',
    services: ['notifier'],
    description: 'How long an open provider breaker sends its messages to the retry schedule before probing the provider again',
    parse: duration,
  }),
} satisfies Record<string, VarSpec<unknown>>;
