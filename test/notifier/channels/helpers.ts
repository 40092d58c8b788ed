/** Shared set-up of the channel tests: a sandbox on port 0, guard settings, messages. */
import { startSandbox, type Sandbox, type SandboxOptions } from '../../../sandbox/app.js';
import type { GuardDeps } from '../../../notifier/channels/breaker.js';
import type { OutboundMessage, SendContext } from '../../../notifier/channels/channel.js';
import { systemClock, type Clock } from '../../../shared/clock.js';
import type { TestContext } from '../../harness/db.js';

export const CREDENTIALS = { fcmAccessToken: 'fcm-token', smsAccountSid: 'ACtest', smsAuthToken: 'sms-token' };

export async function useSandbox(t: TestContext, opts: SandboxOptions = {}): Promise<Sandbox> {
  const s = await startSandbox({ credentials: CREDENTIALS, ...opts });
  t.teardown(() => s.close());
  return s;
}

/** Breaker settings that never open during a test unless it means to. */
export function guardDeps(overrides: Partial<GuardDeps['breaker']> = {}, clock: Clock = systemClock): GuardDeps {
  return { clock, breaker: { errorThreshold: 0.5, minVolume: 1000, windowMs: 10_000, coolDownMs: 5_000, ...overrides } };
}

export function message(to: string, extra: Partial<OutboundMessage> = {}): OutboundMessage {
  return { to, recipientId: 'user-1', notificationId: 'n-1', title: 'Hello', body: 'Your code is 123456', ...extra };
}

let seq = 0;
export function ctx(deadlineMs = 2_000, deliveryId = `d-${++seq}`): SendContext {
  return { deliveryId, idempotencyKey: deliveryId, deadlineMs };
}

/** A port nothing listens on (bound and released). */
export async function closedPort(): Promise<number> {
  const { freePort } = await import('../../harness/ports.js');
  return freePort();
}
