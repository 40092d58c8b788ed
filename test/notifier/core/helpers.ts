/**
 * The notifier core under test: a real notifier (startNotifier: migrations, pg-boss, workers, HTTP
 * on port 0) over its own test database, with scripted in-process channels where a test needs
 * exact control over what a provider answers, and the HTTP calls tests make.
 */
import { loadConfig } from '../../../shared/config.js';
import { startNotifier, type Notifier, type NotifierDeps } from '../../../notifier/app.js';
import { notifierConfig } from '../../../notifier/config.js';
import type { Channel, ChannelName, LookupResult, OutboundMessage, SendContext, SendResult } from '../../../notifier/channels/channel.js';
import type { Channels } from '../../../notifier/workers/deliver.js';
import { useTestDatabase, type TestContext, type TestDatabase } from '../../harness/db.js';
import { testEnv } from '../../harness/services.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';

export const SERVICE_SECRET = 'core-test-service-secret-0123456789';

/**
 * Fast settings for tests: short retries and polls. Override per test.
 *
 * The idle poll is what a test waits on only for work this process did not wake at once (a retry
 * whose delay ran out, another replica's work). It is one statement per period for all the queues
 * (notifier/queues/watch.ts): an idle notifier at 100 ms costs about 0.06 of a core, its own and
 * PostgreSQL's (bench/RESULTS.md, "One statement for the idle poll").
 */
export const FAST_ENV: Record<string, string> = {
  SERVICE_SECRET,
  NOTIFIER_RETRY_SCHEDULE: '50ms,100ms',
  NOTIFIER_IDLE_POLL: 'transactional=100ms,high=100ms,normal=100ms,low=100ms',
  NOTIFIER_SEND_TIMEOUT: '2s',
  NOTIFIER_TRACKING_SECRET: 'tracking-secret-for-tests-0123',
  NOTIFIER_PUBLIC_URL: 'http://edge.test',
  SHUTDOWN_GRACE: '2s',
  DATABASE_POOL_MAX: '10',
};

export interface Call {
  channel: ChannelName;
  provider: string;
  msg: OutboundMessage;
  ctx: SendContext;
  at: number;
}

type Script = (msg: OutboundMessage, ctx: SendContext, n: number) => SendResult | Promise<SendResult>;

/** A channel whose answers a test scripts; it records every call. */
export class ScriptedChannel implements Channel {
  readonly calls: Call[] = [];
  lookups: string[] = [];
  script: Script;
  lookupScript: ((key: string) => LookupResult | Promise<LookupResult>) | undefined;
  lookup?: (idempotencyKey: string) => Promise<LookupResult>;

  constructor(
    readonly name: ChannelName,
    readonly provider: string,
    script?: Script,
  ) {
    this.script = script ?? ((_m, ctx) => ({ ok: true, providerMessageId: `${provider}-${ctx.idempotencyKey}` }));
  }

  /** Gives the channel a reconciliation lookup (like the Twilio-style SMS API). */
  withLookup(fn: (key: string) => LookupResult | Promise<LookupResult>): this {
    this.lookupScript = fn;
    this.lookup = async (key) => {
      this.lookups.push(key);
      return fn(key);
    };
    return this;
  }

  async send(msg: OutboundMessage, ctx: SendContext): Promise<SendResult> {
    const n = this.calls.filter((c) => c.ctx.deliveryId === ctx.deliveryId).length;
    this.calls.push({ channel: this.name, provider: this.provider, msg, ctx, at: Date.now() });
    return this.script(msg, ctx, n);
  }

  breakerState(): 'closed' {
    return 'closed';
  }

  async close(): Promise<void> {}

  /** Calls for one delivery. */
  callsFor(deliveryId: string): Call[] {
    return this.calls.filter((c) => c.ctx.deliveryId === deliveryId);
  }
}

export interface TestChannels extends Channels {
  primary: Record<ChannelName, ScriptedChannel>;
  secondary: Partial<Record<ChannelName, ScriptedChannel>>;
}

export function scriptedChannels(withSecondary: ChannelName[] = []): TestChannels {
  const primary = {
    push: new ScriptedChannel('push', 'fcm'),
    email: new ScriptedChannel('email', 'smtp'),
    sms: new ScriptedChannel('sms', 'twilio'),
    in_app: new ScriptedChannel('in_app', 'inbox'),
  };
  const secondary: Partial<Record<ChannelName, ScriptedChannel>> = {};
  for (const c of withSecondary) secondary[c] = new ScriptedChannel(c, `${primary[c].provider}-secondary`);
  return { primary, secondary };
}

/** A decoded JSON body; tests read it structurally and tap compares it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface Core {
  notifier: Notifier;
  db: TestDatabase;
  url: string;
  /** Headers of a service caller vouched for by the sidecar. */
  service: Record<string, string>;
  admin: Record<string, string>;
  user(id: string): Record<string, string>;
  as(subject: string, role: string): Record<string, string>;
  api(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: Json; headers: Headers }>;
  /** POSTs a notification as the service caller. */
  notify(body: Record<string, unknown>, headers?: Record<string, string>): Promise<{ status: number; body: Json; headers: Headers }>;
  status(id: string): Promise<Json>;
  /** Waits until the notification's overall status passes `done`. */
  waitStatus(id: string, done: (s: Json) => boolean, timeoutMs?: number): Promise<Json>;
}

export interface CoreOptions {
  env?: Record<string, string>;
  deps?: NotifierDeps;
  /** Scripted channels; in_app's default script writes the real inbox. */
  channels?: TestChannels;
  /** Start against this database instead of a fresh one. */
  db?: TestDatabase;
}

export async function startCore(t: TestContext, label: string, opts: CoreOptions = {}): Promise<Core> {
  const db = opts.db ?? (await useTestDatabase(t, label, { poolMax: 4 }));
  const config = loadConfig(notifierConfig, testEnv({ ...FAST_ENV, ...opts.env, DATABASE_URL: db.url }));
  const channels = opts.channels;
  const deps: NotifierDeps = { ...opts.deps };
  if (channels) {
    deps.channels = (writeInbox) => {
      channels.primary.in_app.script = async (msg, ctx) => {
        const id = await writeInbox(msg, ctx);
        return { ok: true, providerMessageId: typeof id === 'string' ? id : ctx.deliveryId };
      };
      return channels;
    };
  }
  const notifier = await startNotifier(config, testLogger('notifier'), deps);
  t.teardown(() => notifier.close());
  const url = `http://127.0.0.1:${notifier.port}`;
  const as = (subject: string, role: string): Record<string, string> => ({
    'x-subject': subject,
    'x-subject-role': role,
    'x-subject-secret': SERVICE_SECRET,
  });
  const service = as('key:' + 'a'.repeat(64), 'service');
  const api: Core['api'] = async (method, path, body, headers = service) => {
    const res = await fetch(url + path, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
  const core: Core = {
    notifier,
    db,
    url,
    service,
    admin: as('user:operator', 'admin'),
    user: (id) => as(`user:${id}`, 'customer'),
    as,
    api,
    notify: (body, headers) => api('POST', '/api/v1/notifications', body, headers),
    status: async (id) => (await api('GET', `/api/v1/notifications/${id}/status`)).body,
    waitStatus: (id, done, timeoutMs = 8000) =>
      waitFor(
        async () => {
          const s = await core.status(id);
          return done(s) ? s : undefined;
        },
        { timeoutMs, what: `notification ${id} to reach the expected status` },
      ),
  };
  return core;
}

/** A template with every channel, default locale en and a French variant. */
export async function createTemplate(core: Core, id: string, variants?: Record<string, unknown>): Promise<void> {
  const en = {
    push: { title: 'Hi {{name}}', body: 'Your code is {{code}}' },
    email: { subject: 'Code for {{name}}', text: 'Your code is {{code}}', html: '<html><body><p>Your code is {{code}}</p></body></html>' },
    sms: { body: 'Code {{code}}' },
    in_app: { title: 'Hello {{name}}', body: 'Code {{code}}' },
  };
  const fr = {
    push: { title: 'Salut {{name}}', body: 'Votre code est {{code}}' },
    email: { subject: 'Code pour {{name}}', text: 'Votre code est {{code}}' },
    sms: { body: 'Code {{code}}' },
    in_app: { title: 'Bonjour {{name}}', body: 'Code {{code}}' },
  };
  const r = await core.api('PUT', `/api/v1/admin/templates/${id}`, { default_locale: 'en', variants: variants ?? { en, fr } }, core.admin);
  if (r.status !== 201 && r.status !== 200) throw new Error(`creating template ${id}: ${r.status} ${JSON.stringify(r.body)}`);
}

export async function putProfile(core: Core, userId: string, profile: Record<string, string>): Promise<void> {
  const r = await core.api('PUT', `/api/v1/users/${userId}/profile`, profile, core.service);
  if (r.status !== 201 && r.status !== 200) throw new Error(`profile ${userId}: ${r.status} ${JSON.stringify(r.body)}`);
}

export async function addDevice(core: Core, userId: string, token: string): Promise<void> {
  const r = await core.api('POST', `/api/v1/users/${userId}/devices`, { token, platform: 'android' }, core.service);
  if (r.status !== 201 && r.status !== 200) throw new Error(`device ${userId}: ${r.status} ${JSON.stringify(r.body)}`);
}

/** A request body with defaults. */
export function request(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    event_type: 'auth.code',
    recipient_id: 'u1',
    template_id: 'code_v1',
    template_data: { name: 'Ada', code: '123456' },
    priority: 'transactional',
    ...over,
  };
}

/** The delivery rows of a notification, by channel. */
export async function deliveries(core: Core, notificationId: string): Promise<Record<string, Json>> {
  const { rows } = await core.db.pool.query('SELECT * FROM deliveries WHERE notification_id = $1', [notificationId]);
  return Object.fromEntries(rows.map((r) => [r.channel, r]));
}

/** A status view without its per-channel `details`: the overall status and each channel's. */
/**
 * Every channel has left `queued`. The rollup alone is not enough to wait on: it is the most
 * advanced channel's state, so it reads `sent` while another channel is still on its way.
 */
export function settled(view: Json): boolean {
  return view.status !== 'queued' && Object.values(view.channels as Record<string, string>).every((c) => c !== 'queued');
}

export function summary(view: Json): { status: string; channels: Record<string, string> } {
  return { status: view.status, channels: view.channels };
}
