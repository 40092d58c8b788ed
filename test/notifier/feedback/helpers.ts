/**
 * A notifier wired to the sandbox providers the way `npm start` wires them: the real channels
 * (SMTP, Twilio-style SMS) pointed at the sandbox, which posts its signed webhooks and status
 * callbacks back to the notifier. The notifier believes it is reached at NOTIFIER_PUBLIC_URL
 * (`http://edge.test`, as behind the sidecar); the sandbox signs that URL and delivers to the
 * notifier's real port, as a proxy in between would. The notifier accepts the sandbox's SNS topic
 * (NOTIFIER_SES_TOPIC_ARNS, as `npm start` sets it); a test may pass another value, or `''` for
 * none.
 */
import { SANDBOX_TOPIC_ARN, startSandbox, type Sandbox, type SandboxOptions } from '../../../sandbox/app.js';
import type { TestContext } from '../../harness/db.js';
import { waitFor } from '../../harness/wait.js';
import { createTemplate, putProfile, startCore, type Core, type CoreOptions, type Json } from '../core/helpers.js';

export const SMS_ACCOUNT = 'ACfeedback';
export const SMS_TOKEN = 'feedback-sms-token';

export interface FeedbackRig {
  core: Core;
  sandbox: Sandbox;
  /** A user with an e-mail address and a phone number. */
  user(id: string, email: string, phone?: string): Promise<void>;
  /** A transactional notification to `userId` on these channels; its id. */
  send(userId: string, channels: string[], extra?: Record<string, unknown>): Promise<string>;
  /** Waits until each named channel of the notification shows the given state. */
  waitChannels(id: string, want: Record<string, string>, timeoutMs?: number): Promise<Json>;
  /** The notifier's /metrics text. */
  metrics(): Promise<string>;
}

export async function feedbackRig(
  t: TestContext,
  label: string,
  opts: {
    sandbox?: SandboxOptions;
    core?: CoreOptions;
    /** Other host:ports an SNS certificate may come from over http. */ certHosts?: string[];
  } = {},
): Promise<FeedbackRig> {
  const sandbox = await startSandbox({ credentials: { smsAccountSid: SMS_ACCOUNT, smsAuthToken: SMS_TOKEN }, ...opts.sandbox });
  t.teardown(() => sandbox.close(1000));
  const core = await startCore(t, label, {
    ...opts.core,
    env: {
      SMTP_URL: sandbox.smtpUrl,
      SMS_URL: sandbox.url,
      FCM_URL: sandbox.url,
      SMS_ACCOUNT_SID: SMS_ACCOUNT,
      SMS_AUTH_TOKEN: SMS_TOKEN,
      NOTIFIER_SNS_CERT_HTTP_HOSTS: [`127.0.0.1:${sandbox.port}`, ...(opts.certHosts ?? [])].join(','),
      NOTIFIER_SES_TOPIC_ARNS: SANDBOX_TOPIC_ARN,
      ...opts.core?.env,
    },
  });
  sandbox.feedback.targets.snsEndpoint = `${core.url}/api/v1/webhooks/ses`;
  sandbox.feedback.targets.callbackOrigin = core.url;
  await createTemplate(core, 'code_v1');
  const rig: FeedbackRig = {
    core,
    sandbox,
    user: (id, email, phone) => putProfile(core, id, { email, ...(phone ? { phone } : {}) }),
    async send(userId, channels, extra = {}) {
      const r = await core.notify({
        event_type: 'auth.code',
        recipient_id: userId,
        template_id: 'code_v1',
        template_data: { name: 'Ada', code: '123456' },
        priority: 'transactional',
        channels,
        idempotency_key: `${userId}-${Math.random().toString(36).slice(2)}`,
        ...extra,
      });
      if (r.status !== 202) throw new Error(`notify: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.notification_id as string;
    },
    waitChannels: (id, want, timeoutMs = 10_000) =>
      waitFor(
        async () => {
          const s = await core.status(id);
          return Object.entries(want).every(([c, st]) => s.channels?.[c] === st) ? s : undefined;
        },
        { timeoutMs, what: `notification ${id} to show ${JSON.stringify(want)}` },
      ),
    metrics: async () => (await fetch(`${core.url}/metrics`)).text(),
  };
  return rig;
}

/** The value of one series in a Prometheus exposition (0 when absent). */
export function series(exposition: string, name: string, labels: Record<string, string>): number {
  for (const line of exposition.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}
