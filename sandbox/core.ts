/**
 * What the sandbox's protocol handlers share: the message store, what recipients would see (the
 * display model), the fault table, the seeded
 * random source, the clock, waits that shutdown can cut short, and the metrics. Plus
 * `applyFault`, which turns a fault decision into a delay and an answer the same way for every
 * protocol.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../shared/clock.js';
import type { Logger } from '../shared/log.js';
import { Counter, type Registry } from '../shared/metrics.js';
import { decideFault, type FaultError, type FaultOutcome, type FaultTable, type SandboxChannel } from './faults.js';
import type { MessageStore } from './store.js';
import type { DisplayModel } from './display.js';
import { MintedTokens, type SandboxServiceAccount } from './minted-tokens.js';
import type { SandboxMessage } from './store.js';

/** Credentials the sandbox requires; an unset one accepts anything. */
export interface SandboxCredentials {
  fcmAccessToken?: string;
  /** When set, FCM takes only the access tokens `/token` minted for this account (and not fcmAccessToken). */
  fcmServiceAccount?: SandboxServiceAccount;
  smsAccountSid?: string;
  smsAuthToken?: string;
}

/**
 * What is told of accepted messages so it can report them back (feedback.ts's SandboxFeedback):
 * declared here, not imported, because feedback.ts takes the core for its clock, faults and waits.
 */
export interface AcceptedMessages {
  /** An e-mail was accepted under SES message id `m.id`. */
  emailAccepted(m: SandboxMessage): void;
  /** An SMS was accepted as `m.id`; status callbacks go to `statusCallback`, signed with `authToken`. */
  smsAccepted(m: SandboxMessage, accountSid: string, statusCallback: string | undefined, authToken: string): void;
}

/** Label values of `sandbox_requests_total{outcome}`. */
export type RequestOutcome = 'accepted' | 'duplicate' | 'error' | 'timeout' | 'lost' | 'rejected' | 'validated';

export class SandboxCore {
  readonly store: MessageStore;
  /** What recipients would see of the accepted messages (display.ts). */
  readonly display: DisplayModel;
  readonly faults: FaultTable;
  readonly random: () => number;
  readonly clock: Clock;
  readonly log: Logger;
  readonly credentials: SandboxCredentials;
  readonly mintedTokens = new MintedTokens();
  /** Reports accepted messages back (webhooks and status callbacks); set once the server listens. */
  feedback: AcceptedMessages | undefined;
  readonly #requests: Counter<'channel' | 'provider' | 'outcome'>;
  readonly #waits = new Set<() => void>();
  #closing = false;

  constructor(deps: {
    store: MessageStore;
    display: DisplayModel;
    faults: FaultTable;
    random: () => number;
    clock: Clock;
    log: Logger;
    credentials: SandboxCredentials;
    registry: Registry;
  }) {
    this.store = deps.store;
    this.display = deps.display;
    this.faults = deps.faults;
    this.random = deps.random;
    this.clock = deps.clock;
    this.log = deps.log;
    this.credentials = deps.credentials;
    this.#requests =
      (deps.registry.getSingleMetric('sandbox_requests_total') as Counter<'channel' | 'provider' | 'outcome'> | undefined) ??
      new Counter({
        name: 'sandbox_requests_total',
        help: 'Requests to the sandbox providers, by channel, provider and outcome',
        labelNames: ['channel', 'provider', 'outcome'] as const,
        registers: [deps.registry],
      });
  }

  /** A provider message id: random, so ids never repeat across sandbox restarts. */
  newId(prefix = ''): string {
    return prefix + randomBytes(16).toString('hex');
  }

  /** Epoch seconds, as the records carry them. */
  nowSeconds(): number {
    return this.clock.now() / 1000;
  }

  decide(channel: SandboxChannel, provider: string, to: string): FaultOutcome {
    return decideFault(this.faults.get(channel, provider), channel, to, this.random);
  }

  /** The fault an address asks for by itself or by a profile's lists, without drawing randomness. */
  decideAddressOnly(channel: SandboxChannel, provider: string, to: string): FaultOutcome | undefined {
    const outcome = decideFault(this.faults.get(channel, provider), channel, to, () => 1);
    return outcome.kind === 'error' ? outcome : undefined;
  }

  count(channel: SandboxChannel, provider: string, outcome: RequestOutcome): void {
    this.#requests.inc({ channel, provider, outcome });
  }

  /** Waits `ms` (real time: it is what the client experiences), or less if the sandbox closes. */
  wait(ms: number): Promise<void> {
    if (ms <= 0 || this.#closing) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#waits.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waits.add(done);
    });
  }

  /** Ends every wait now (shutdown). */
  releaseWaits(): void {
    this.#closing = true;
    for (const done of [...this.#waits]) done();
  }

  /**
   * Plays out a fault decision: waits the latency, then answers with `accept()` (which records the
   * message) or `fail(error)`; a timeout holds the request and then answers `timedOut()` (the client
   * has normally given up by then); a lost answer records the message, then holds. `accepted`
   * names what an accepted request is counted as (`validated` for an FCM dry run).
   */
  async applyFault<T>(
    channel: SandboxChannel,
    provider: string,
    outcome: FaultOutcome,
    handlers: { accept: () => T; fail: (error: FaultError, retryAfterS: number | undefined) => T; timedOut: () => T },
    accepted: RequestOutcome = 'accepted',
  ): Promise<T> {
    switch (outcome.kind) {
      case 'pass':
        await this.wait(outcome.latencyMs);
        this.count(channel, provider, accepted);
        return handlers.accept();
      case 'error':
        await this.wait(outcome.latencyMs);
        this.count(channel, provider, 'error');
        return handlers.fail(outcome.error, outcome.retryAfterS);
      case 'timeout':
        this.count(channel, provider, 'timeout');
        await this.wait(outcome.holdMs);
        return handlers.timedOut();
      case 'lost': {
        await this.wait(outcome.latencyMs);
        this.count(channel, provider, 'lost');
        const answer = handlers.accept();
        await this.wait(outcome.holdMs);
        return answer;
      }
    }
  }
}
