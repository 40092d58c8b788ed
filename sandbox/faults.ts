/**
 * Fault injection for the sandbox providers: profiles set by configuration (POST /sandbox/faults,
 * SANDBOX_FAULTS) and faults triggered by the address of one request. The decision is a pure
 * function of the profile, the address and one draw from an injected random source, so a seeded
 * source makes a run repeatable.
 *
 * Triggers by address (always on, no configuration needed):
 * - push token or e-mail local part starting with `fault-<name>` (case-insensitive), where name is
 *   `unavailable`, `quota_exceeded`, `internal`, `invalid_argument`, `unregistered`,
 *   `unauthenticated`, `timeout` (no answer) or `lost` (accepted and recorded, answer never sent);
 * - phone number `+999<NNN>…`: 503 unavailable, 429 quota_exceeded, 500 internal, 400
 *   invalid_argument (invalid number), 404 unregistered (not a mobile number), 401
 *   unauthenticated, 408 timeout, 499 lost.
 */
import { invalidField } from '../shared/errors.js';

/** The provider channels the sandbox stands in for. */
export type SandboxChannel = 'push' | 'email' | 'sms';
export const SANDBOX_CHANNELS: readonly SandboxChannel[] = ['push', 'email', 'sms'];

/** Provider errors, named after FCM's; each protocol renders them its own way. */
export type FaultError = 'UNAVAILABLE' | 'QUOTA_EXCEEDED' | 'INTERNAL' | 'INVALID_ARGUMENT' | 'UNREGISTERED' | 'UNAUTHENTICATED';
export const FAULT_ERRORS: readonly FaultError[] = [
  'UNAVAILABLE',
  'QUOTA_EXCEEDED',
  'INTERNAL',
  'INVALID_ARGUMENT',
  'UNREGISTERED',
  'UNAUTHENTICATED',
];

/** How long a `timeout` or `lost` fault holds the request when the profile does not say. */
export const DEFAULT_HOLD_MS = 30_000;

/** The faults of one channel (and provider, or every provider: `*`). */
export interface FaultProfile {
  channel: SandboxChannel;
  provider: string;
  /** Added before every answer, ms. */
  latencyMs: number;
  /** Share of requests answered with `error`. */
  errorRate: number;
  error: FaultError;
  /** Share of requests never answered (until `holdMs`). */
  timeoutRate: number;
  /** Share of requests accepted and recorded whose answer is never sent (until `holdMs`). */
  lostResponseRate: number;
  /** Retry-After (seconds) on HTTP error answers. */
  retryAfterS: number | undefined;
  holdMs: number;
  /** Push tokens answered `UNREGISTERED`. */
  unregisteredTokens: ReadonlySet<string>;
  /** Addresses answered `INVALID_ARGUMENT` (invalid number, unknown mailbox, invalid token). */
  invalidRecipients: ReadonlySet<string>;
  /**
   * What the provider reports back later about an accepted message (the webhooks, feedback.ts):
   * e-mail `delivered`, `bounce_permanent`, `bounce_transient`, `complaint` (a Delivery, then the
   * Complaint); SMS `delivered`, `undelivered`, `failed`. Default `delivered`.
   */
  outcome: FeedbackOutcome | undefined;
  /** The error code reported with a failure (SMS ErrorCode; the SMTP status of a bounce). */
  outcomeErrorCode: string | undefined;
  /** Before each webhook or callback of a message, ms. */
  callbackDelayMs: number;
  /** Share of webhooks and callbacks sent twice (the same event: a replay). */
  callbackDuplicateRate: number;
  /** Send a message's events last first (e.g. `delivered` before `sent`, a Complaint before its Delivery). */
  callbackReorder: boolean;
}

/** What a provider reports about a message after accepting it. */
export type FeedbackOutcome = 'delivered' | 'bounce_permanent' | 'bounce_transient' | 'complaint' | 'undelivered' | 'failed';
export const EMAIL_OUTCOMES: readonly FeedbackOutcome[] = ['delivered', 'bounce_permanent', 'bounce_transient', 'complaint'];
export const SMS_OUTCOMES: readonly FeedbackOutcome[] = ['delivered', 'undelivered', 'failed'];

/**
 * Amazon SES's mailbox simulator, by local part at `simulator.amazonses.com`: `success`,
 * `bounce` (a permanent bounce), `complaint`, `suppressionlist` (a permanent bounce).
 */
const SES_SIMULATOR: Record<string, FeedbackOutcome> = {
  success: 'delivered',
  bounce: 'bounce_permanent',
  complaint: 'complaint',
  suppressionlist: 'bounce_permanent',
};

/** What will be reported about an accepted message to `to`: the address's own (SES simulator), else the profile's, else `delivered`. */
export function decideOutcome(profile: FaultProfile | undefined, channel: SandboxChannel, to: string): FeedbackOutcome {
  if (channel === 'email') {
    const m = /^([^@+]+)(?:\+[^@]*)?@simulator\.amazonses\.com$/i.exec(to);
    const simulated = m ? SES_SIMULATOR[m[1]!.toLowerCase()] : undefined;
    if (simulated) return simulated;
  }
  return profile?.outcome ?? 'delivered';
}

/** What to do with one request. */
export type FaultOutcome =
  | { kind: 'pass'; latencyMs: number }
  | { kind: 'error'; error: FaultError; latencyMs: number; retryAfterS: number | undefined }
  | { kind: 'timeout'; holdMs: number }
  | { kind: 'lost'; latencyMs: number; holdMs: number };

type Trigger = FaultError | 'TIMEOUT' | 'LOST';

const NAMED: Record<string, Trigger> = {
  unavailable: 'UNAVAILABLE',
  quota_exceeded: 'QUOTA_EXCEEDED',
  internal: 'INTERNAL',
  invalid_argument: 'INVALID_ARGUMENT',
  unregistered: 'UNREGISTERED',
  unauthenticated: 'UNAUTHENTICATED',
  timeout: 'TIMEOUT',
  lost: 'LOST',
};

const PHONE: Record<string, Trigger> = {
  '503': 'UNAVAILABLE',
  '429': 'QUOTA_EXCEEDED',
  '500': 'INTERNAL',
  '400': 'INVALID_ARGUMENT',
  '404': 'UNREGISTERED',
  '401': 'UNAUTHENTICATED',
  '408': 'TIMEOUT',
  '499': 'LOST',
};

/** The fault an address asks for by itself, if any (see the module comment). */
export function addressTrigger(channel: SandboxChannel, to: string): Trigger | undefined {
  if (channel === 'sms') {
    const m = /^\+999(\d{3})/.exec(to.replace(/[\s-]/g, ''));
    return m ? PHONE[m[1]!] : undefined;
  }
  const subject = channel === 'email' ? to.slice(0, Math.max(0, to.lastIndexOf('@'))) || to : to;
  const m = /^fault-([a-z_]+?)(?:[-+.]|$)/i.exec(subject);
  return m ? NAMED[m[1]!.toLowerCase()] : undefined;
}

/**
 * Decides the fault for one request: the address's own trigger first, then the profile's lists,
 * then one draw of `random()` against timeout, error and lost-response rates (in that order).
 * Without a profile only address triggers apply and nothing is drawn.
 */
export function decideFault(profile: FaultProfile | undefined, channel: SandboxChannel, to: string, random: () => number): FaultOutcome {
  const latencyMs = profile?.latencyMs ?? 0;
  const holdMs = profile?.holdMs ?? DEFAULT_HOLD_MS;
  const retryAfterS = profile?.retryAfterS;
  const trigger = addressTrigger(channel, to);
  if (trigger === 'TIMEOUT') return { kind: 'timeout', holdMs };
  if (trigger === 'LOST') return { kind: 'lost', latencyMs, holdMs };
  if (trigger !== undefined) return { kind: 'error', error: trigger, latencyMs, retryAfterS };
  if (!profile) return { kind: 'pass', latencyMs };
  if (profile.unregisteredTokens.has(to)) return { kind: 'error', error: 'UNREGISTERED', latencyMs, retryAfterS };
  if (profile.invalidRecipients.has(to)) return { kind: 'error', error: 'INVALID_ARGUMENT', latencyMs, retryAfterS };
  const r = random();
  if (r < profile.timeoutRate) return { kind: 'timeout', holdMs };
  if (r < profile.timeoutRate + profile.errorRate) return { kind: 'error', error: profile.error, latencyMs, retryAfterS };
  if (r < profile.timeoutRate + profile.errorRate + profile.lostResponseRate) return { kind: 'lost', latencyMs, holdMs };
  return { kind: 'pass', latencyMs };
}

/** A seeded pseudo-random source in [0, 1) (mulberry32): the same seed gives the same sequence. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ── the JSON form (POST /sandbox/faults, SANDBOX_FAULTS) ───────────────────

const KNOWN = new Set([
  'channel',
  'provider',
  'latency_ms',
  'error_rate',
  'error',
  'timeout_rate',
  'lost_response_rate',
  'retry_after_s',
  'hold_ms',
  'unregistered_tokens',
  'invalid_recipients',
  'outcome',
  'outcome_error_code',
  'callback_delay_ms',
  'callback_duplicate_rate',
  'callback_reorder',
]);

function rate(body: Record<string, unknown>, k: string): number {
  const v = body[k];
  if (v === undefined) return 0;
  if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw invalidField(k, 'must be a number from 0 to 1');
  return v;
}

function ms(body: Record<string, unknown>, k: string, max: number): number | undefined {
  const v = body[k];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) throw invalidField(k, `must be an integer from 0 to ${max}`);
  return v;
}

function strings(body: Record<string, unknown>, k: string): Set<string> {
  const v = body[k];
  if (v === undefined) return new Set();
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw invalidField(k, 'must be an array of strings');
  return new Set(v);
}

/** Validates one fault profile in its JSON form; errors name the field (400 `invalid_field`). */
export function parseFaultProfile(input: unknown): FaultProfile {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw invalidField('body', 'must be a JSON object');
  const body = input as Record<string, unknown>;
  for (const k of Object.keys(body)) if (!KNOWN.has(k)) throw invalidField(k, 'is not a fault setting');
  const channel = body.channel;
  if (typeof channel !== 'string' || !(SANDBOX_CHANNELS as readonly string[]).includes(channel)) {
    throw invalidField('channel', `must be one of ${SANDBOX_CHANNELS.join(', ')}`);
  }
  const provider = body.provider ?? '*';
  if (typeof provider !== 'string' || !/^(\*|[A-Za-z0-9_.-]{1,64})$/.test(provider)) {
    throw invalidField('provider', 'must be a provider name (letters, digits, _ . -) or *');
  }
  const error = body.error ?? 'UNAVAILABLE';
  if (typeof error !== 'string' || !(FAULT_ERRORS as readonly string[]).includes(error)) {
    throw invalidField('error', `must be one of ${FAULT_ERRORS.join(', ')}`);
  }
  const profile: FaultProfile = {
    channel: channel as SandboxChannel,
    provider,
    latencyMs: ms(body, 'latency_ms', 600_000) ?? 0,
    errorRate: rate(body, 'error_rate'),
    error: error as FaultError,
    timeoutRate: rate(body, 'timeout_rate'),
    lostResponseRate: rate(body, 'lost_response_rate'),
    retryAfterS: ms(body, 'retry_after_s', 86_400),
    holdMs: ms(body, 'hold_ms', 600_000) ?? DEFAULT_HOLD_MS,
    unregisteredTokens: strings(body, 'unregistered_tokens'),
    invalidRecipients: strings(body, 'invalid_recipients'),
    outcome: undefined,
    outcomeErrorCode: undefined,
    callbackDelayMs: ms(body, 'callback_delay_ms', 600_000) ?? 0,
    callbackDuplicateRate: rate(body, 'callback_duplicate_rate'),
    callbackReorder: false,
  };
  if (body.outcome !== undefined) {
    const allowed = channel === 'email' ? EMAIL_OUTCOMES : channel === 'sms' ? SMS_OUTCOMES : [];
    if (typeof body.outcome !== 'string' || !(allowed as readonly string[]).includes(body.outcome)) {
      throw invalidField(
        'outcome',
        allowed.length ? `must be one of ${allowed.join(', ')} for ${channel}` : `is not reported for ${channel}`,
      );
    }
    profile.outcome = body.outcome as FeedbackOutcome;
  }
  if (body.outcome_error_code !== undefined) {
    if (typeof body.outcome_error_code !== 'string' || !/^[0-9.]{1,16}$/.test(body.outcome_error_code)) {
      throw invalidField('outcome_error_code', 'must be digits and dots, at most 16');
    }
    profile.outcomeErrorCode = body.outcome_error_code;
  }
  if (body.callback_reorder !== undefined) {
    if (typeof body.callback_reorder !== 'boolean') throw invalidField('callback_reorder', 'must be true or false');
    profile.callbackReorder = body.callback_reorder;
  }
  if (profile.errorRate + profile.timeoutRate + profile.lostResponseRate > 1) {
    throw invalidField('error_rate', 'error_rate + timeout_rate + lost_response_rate must not exceed 1');
  }
  return profile;
}

/** The JSON form of a profile (what GET /sandbox/faults shows). */
export function faultProfileJson(p: FaultProfile): Record<string, unknown> {
  const out: Record<string, unknown> = {
    channel: p.channel,
    provider: p.provider,
    latency_ms: p.latencyMs,
    error_rate: p.errorRate,
    error: p.error,
    timeout_rate: p.timeoutRate,
    lost_response_rate: p.lostResponseRate,
    hold_ms: p.holdMs,
    unregistered_tokens: [...p.unregisteredTokens],
    invalid_recipients: [...p.invalidRecipients],
    callback_delay_ms: p.callbackDelayMs,
    callback_duplicate_rate: p.callbackDuplicateRate,
    callback_reorder: p.callbackReorder,
  };
  if (p.retryAfterS !== undefined) out.retry_after_s = p.retryAfterS;
  if (p.outcome !== undefined) out.outcome = p.outcome;
  if (p.outcomeErrorCode !== undefined) out.outcome_error_code = p.outcomeErrorCode;
  return out;
}

/** The profiles in force, one per (channel, provider); a provider's own profile wins over `*`. */
export class FaultTable {
  readonly #profiles = new Map<string, FaultProfile>();

  set(p: FaultProfile): void {
    this.#profiles.set(`${p.channel}\0${p.provider}`, p);
  }

  /** Removes every profile, or those of one channel (and provider). */
  clear(channel?: SandboxChannel, provider?: string): void {
    if (channel === undefined) return this.#profiles.clear();
    for (const [k, p] of this.#profiles)
      if (p.channel === channel && (provider === undefined || p.provider === provider)) this.#profiles.delete(k);
  }

  get(channel: SandboxChannel, provider: string): FaultProfile | undefined {
    return this.#profiles.get(`${channel}\0${provider}`) ?? this.#profiles.get(`${channel}\0*`);
  }

  list(): FaultProfile[] {
    return [...this.#profiles.values()];
  }
}
