/**
 * The sandbox provider server: stand-ins for the push, e-mail and SMS providers that speak their
 * real protocols (FCM HTTP v1 and a Twilio-style REST API on one HTTP port, SMTP on another),
 * record what they accept, and inject latency, errors, timeouts, lost answers and dead tokens on
 * request. `npm start` runs it as its own process (main.ts); tests start it in-process with
 * `startSandbox` on port 0.
 *
 * Logs name the channel, provider and delivery id of a message, never its body, address or token.
 */
import { createPublicKey } from 'node:crypto';
import { ConfigError, type ConfigOf } from '../shared/config.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { PlatformError } from '../shared/errors.js';
import { createLogger, type Logger } from '../shared/log.js';
import { createRegistry, type Registry } from '../shared/metrics.js';
import type { Started } from '../shared/main.js';
import { startHttpService } from '../shared/service.js';
import { adminRoutes } from './admin.js';
import type { sandboxConfig } from './config.js';
import { SandboxCore, type SandboxCredentials } from './core.js';
import { emailHooks } from './email.js';
import { fcmRoutes } from './fcm.js';
import { googleOAuthRoutes } from './google-oauth.js';
import { FaultTable, parseFaultProfile, seededRandom } from './faults.js';
import { startSmtpServer } from './smtp.js';
import { MessageStore, type MessageFilter, type SandboxMessage } from './store.js';
import { DisplayModel, type DevicePlatform } from './display.js';
import { twilioRoutes } from './twilio.js';
import { SandboxFeedback } from './feedback.js';
import { SANDBOX_TOPIC_ARN, SandboxSns } from './sns.js';
import { snsRoutes } from './sns-routes.js';

export interface SandboxOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** HTTP port (FCM, SMS, /sandbox); default 0, a free port. */
  port?: number;
  /** SMTP port; default 0, a free port. */
  smtpPort?: number;
  /** Seed of the fault-injection randomness (default 1); ignored when `random` is given. */
  seed?: number;
  random?: () => number;
  clock?: Clock;
  /** Credentials to require; unset ones accept anything. */
  credentials?: SandboxCredentials;
  /** Fault profiles in their JSON form (as POST /sandbox/faults takes them). */
  faults?: unknown[];
  /** Accepted messages kept (default 100 000); also the entries the display model keeps. */
  maxMessages?: number;
  /** Push tokens' platforms, as the apps registered them with the push service (display.ts); others are android. */
  devices?: Record<string, DevicePlatform>;
  log?: Logger;
  registry?: Registry;
  /** Where SES events are posted as SNS notifications (can be changed later: PUT /sandbox/callbacks). */
  snsEndpoint?: string;
  /** Sends SMS status callbacks to this origin instead of the StatusCallback's own (which is still signed). */
  callbackOrigin?: string;
  /** SNS SignatureVersion: `1` (SHA1, AWS's default) or `2` (SHA256); default `1`. */
  snsSignatureVersion?: '1' | '2';
}

export { SANDBOX_TOPIC_ARN } from './sns.js';

export interface Sandbox {
  readonly port: number;
  readonly smtpPort: number;
  /** `http://host:port`: the base URL for FCM_URL and SMS_URL. */
  readonly url: string;
  /** `smtp://host:smtpPort`: SMTP_URL. */
  readonly smtpUrl: string;
  readonly core: SandboxCore;
  /** Webhooks and status callbacks (feedback.ts), and the SNS topic that signs them. */
  readonly feedback: SandboxFeedback;
  /** Accepted messages (the same as GET /sandbox/messages). */
  messages(filter?: MessageFilter): SandboxMessage[];
  /** Sets fault profiles (JSON form); throws `invalid_field` naming the bad field. */
  setFaults(...profiles: unknown[]): void;
  clearFaults(): void;
  /** Ends held requests, stops both servers. */
  close(graceMs?: number): Promise<void>;
}

export async function startSandbox(opts: SandboxOptions = {}): Promise<Sandbox> {
  const host = opts.host ?? '127.0.0.1';
  const log = opts.log ?? createLogger({ service: 'sandbox', level: 'silent' });
  const registry = opts.registry ?? createRegistry('sandbox', { defaults: false });
  const faults = new FaultTable();
  for (const p of opts.faults ?? []) faults.set(parseFaultProfile(p));
  const display = new DisplayModel(opts.maxMessages ?? 100_000);
  for (const [token, platform] of Object.entries(opts.devices ?? {})) display.register(token, platform);
  const core = new SandboxCore({
    store: new MessageStore(opts.maxMessages ?? 100_000, (m) => display.accept(m)),
    display,
    faults,
    random: opts.random ?? seededRandom(opts.seed ?? 1),
    clock: opts.clock ?? systemClock,
    log,
    credentials: opts.credentials ?? {},
    registry,
  });
  let baseUrl = '';
  const sns = new SandboxSns({
    topicArn: SANDBOX_TOPIC_ARN,
    signatureVersion: opts.snsSignatureVersion ?? '1',
    baseUrl: () => baseUrl,
    clock: core.clock,
  });
  const feedback = new SandboxFeedback(core, sns, { snsEndpoint: opts.snsEndpoint, callbackOrigin: opts.callbackOrigin });
  core.feedback = feedback;
  const smtp = await startSmtpServer({ host, port: opts.smtpPort ?? 0, hooks: emailHooks(core), log });
  let http;
  try {
    http = await startHttpService({
      name: 'sandbox',
      host,
      port: opts.port ?? 0,
      log,
      registry,
      maxBodyBytes: 1024 * 1024,
      checks: [],
      routes: (app, edge) => {
        adminRoutes(app, edge, core);
        fcmRoutes(app, edge, core);
        googleOAuthRoutes(app, edge, core);
        twilioRoutes(app, edge, core);
        snsRoutes(app, edge, feedback);
      },
    });
  } catch (err) {
    await smtp.close();
    throw err;
  }
  const shown = host === '0.0.0.0' ? '127.0.0.1' : host;
  baseUrl = `http://${shown}:${http.port}`;
  sns.rotate();
  log.info({ port: http.port, smtpPort: smtp.port }, 'sandbox providers listening');
  return {
    port: http.port,
    smtpPort: smtp.port,
    url: `http://${shown}:${http.port}`,
    smtpUrl: `smtp://${shown}:${smtp.port}`,
    core,
    feedback,
    messages: (filter) => core.store.list(filter),
    setFaults: (...profiles) => {
      for (const p of profiles.map(parseFaultProfile)) faults.set(p);
    },
    clearFaults: () => faults.clear(),
    async close(graceMs = 5_000) {
      feedback.close();
      core.releaseWaits();
      await Promise.all([http.close(graceMs), smtp.close()]);
    },
  };
}

/** The sandbox as a service (main.ts): configuration from the environment. */
export async function startSandboxService(config: ConfigOf<typeof sandboxConfig>, log: Logger): Promise<Started & { port: number }> {
  const faults = config.SANDBOX_FAULTS ?? [];
  faults.forEach((p, i) => {
    try {
      parseFaultProfile(p);
    } catch (err) {
      throw new ConfigError('SANDBOX_FAULTS', `item ${i + 1}: ${err instanceof PlatformError ? (err.detail ?? err.message) : String(err)}`);
    }
  });
  const smtpPort = config.SANDBOX_SMTP_PORT ?? (config.SANDBOX_PORT === 0 ? 0 : config.SANDBOX_PORT + 1);
  const sandbox = await startSandbox({
    host: config.HOST,
    port: config.SANDBOX_PORT,
    smtpPort,
    seed: config.SANDBOX_SEED,
    faults,
    maxMessages: config.SANDBOX_MAX_MESSAGES,
    credentials: {
      fcmAccessToken: config.FCM_ACCESS_TOKEN,
      ...(config.FCM_SERVICE_ACCOUNT_FILE && {
        fcmServiceAccount: {
          clientEmail: config.FCM_SERVICE_ACCOUNT_FILE.clientEmail,
          publicKey: createPublicKey(config.FCM_SERVICE_ACCOUNT_FILE.privateKey),
        },
      }),
      smsAccountSid: config.SMS_ACCOUNT_SID,
      smsAuthToken: config.SMS_AUTH_TOKEN,
    },
    log,
    registry: createRegistry('sandbox'),
    ...(config.SANDBOX_SNS_ENDPOINT !== undefined && { snsEndpoint: config.SANDBOX_SNS_ENDPOINT }),
  });
  return {
    port: sandbox.port,
    urls: { 'FCM and SMS (FCM_URL, SMS_URL)': sandbox.url, 'SMTP (SMTP_URL)': sandbox.smtpUrl },
    close: () => sandbox.close(config.SHUTDOWN_GRACE),
  };
}
