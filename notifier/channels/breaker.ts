/**
 * Each provider behind its own circuit breaker, and the bookkeeping every channel shares: the
 * deadline check, the breaker decision, the outcome that counts as a provider failure, and the
 * provider-call metrics.
 */
import { CircuitBreaker, breakerMetrics } from '../../shared/breaker.js';
import type { Clock } from '../../shared/clock.js';
import { Counter, Histogram, type Registry } from '../../shared/metrics.js';
import { isProviderFailure, retry, type ChannelName, type SendResult } from './channel.js';

export { isProviderFailure } from './channel.js';

/** The breaker settings shared by every provider (PROVIDER_BREAKER_*). */
export interface BreakerSettings {
  /** Failure share (0..1] that opens the breaker. */
  errorThreshold: number;
  /** Calls in the window before the share counts. */
  minVolume: number;
  windowMs: number;
  /** How long it stays open before probes, ms. */
  coolDownMs: number;
}

/** Label values of `provider_calls_total{result}`. */
export type CallResult = 'sent' | 'retry' | 'permanent' | 'invalid_token' | 'circuit_open' | 'deadline';

/** `provider_calls_total` and `provider_call_duration_seconds`, shared by all channels of a registry. */
export interface ProviderMetrics {
  calls: Counter<'channel' | 'provider' | 'result' | 'reason'>;
  duration: Histogram<'channel' | 'provider'>;
}

export function providerMetrics(registry: Registry): ProviderMetrics {
  const calls =
    (registry.getSingleMetric('provider_calls_total') as ProviderMetrics['calls'] | undefined) ??
    new Counter({
      name: 'provider_calls_total',
      help: 'Sends handed to a channel, by provider and outcome (circuit_open and deadline never reached the provider)',
      labelNames: ['channel', 'provider', 'result', 'reason'] as const,
      registers: [registry],
    });
  const duration =
    (registry.getSingleMetric('provider_call_duration_seconds') as ProviderMetrics['duration'] | undefined) ??
    new Histogram({
      name: 'provider_call_duration_seconds',
      help: 'Time of provider calls that were made, whatever their outcome',
      labelNames: ['channel', 'provider'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
  return { calls, duration };
}

/** What a provider client needs besides its own settings. */
export interface GuardDeps {
  clock: Clock;
  breaker: BreakerSettings;
  /** Publishes `circuit_breaker_state{breaker="<channel>:<provider>"}` and the provider-call metrics. */
  registry?: Registry;
}

/**
 * Runs provider calls for one (channel, provider) under its breaker. A call that returns a `retry`
 * result (timeout, refused connection, 5xx, 429) or `provider_auth_failed` is a provider failure;
 * any other answer (sent, a permanent refusal of one message, a dead token) shows the provider is
 * working.
 */
export class ProviderGuard {
  readonly breaker: CircuitBreaker;
  readonly #channel: ChannelName;
  readonly #provider: string;
  readonly #clock: Clock;
  readonly #metrics: ProviderMetrics | undefined;

  constructor(channel: ChannelName, provider: string, deps: GuardDeps) {
    this.#channel = channel;
    this.#provider = provider;
    this.#clock = deps.clock;
    this.#metrics = deps.registry ? providerMetrics(deps.registry) : undefined;
    this.breaker = new CircuitBreaker({
      name: `${channel}:${provider}`,
      windowMs: deps.breaker.windowMs,
      buckets: 10,
      errorThreshold: deps.breaker.errorThreshold,
      minVolume: deps.breaker.minVolume,
      coolDownMs: deps.breaker.coolDownMs,
      halfOpenProbes: 2,
      clock: deps.clock,
      onStateChange: deps.registry ? breakerMetrics(deps.registry) : undefined,
    });
  }

  /**
   * Calls `fn(timeoutMs)` unless the deadline is spent or the breaker refuses, in which case the
   * provider is not touched and the result is `retry` (`timeout` or `circuit_open`). A throw from
   * `fn` is a `provider_error` retry.
   */
  async run(deadlineMs: number, providerTimeoutMs: number, fn: (timeoutMs: number) => Promise<SendResult>): Promise<SendResult> {
    const timeoutMs = Math.min(deadlineMs, providerTimeoutMs);
    if (!(timeoutMs > 0)) {
      this.#count('deadline', 'timeout');
      return retry('timeout', { detail: 'no time left before the deadline' });
    }
    if (!this.breaker.allow()) {
      this.#count('circuit_open', 'circuit_open');
      return retry('circuit_open', { retryAfterMs: this.breaker.retryAfterMs(), detail: `${this.breaker.name} circuit is open` });
    }
    const started = this.#clock.now();
    let result: SendResult;
    try {
      result = await fn(timeoutMs);
    } catch (err) {
      result = retry('provider_error', { detail: err instanceof Error ? err.message : String(err) });
    }
    if (isProviderFailure(result)) this.breaker.failure();
    else this.breaker.success();
    this.#metrics?.duration.observe({ channel: this.#channel, provider: this.#provider }, (this.#clock.now() - started) / 1000);
    if (result.ok) this.#count('sent', '');
    else this.#count(result.kind, result.kind === 'invalid_token' ? '' : result.reason);
    return result;
  }

  /** Like `run` for calls that are not sends (lookups): the breaker decides and counts, no metrics. */
  async probe<T>(providerTimeoutMs: number, fn: (timeoutMs: number) => Promise<T>, failed: (r: T) => boolean): Promise<T | 'circuit_open'> {
    if (!this.breaker.allow()) return 'circuit_open';
    let r: T;
    try {
      r = await fn(providerTimeoutMs);
    } catch (err) {
      this.breaker.failure();
      throw err;
    }
    if (failed(r)) this.breaker.failure();
    else this.breaker.success();
    return r;
  }

  #count(result: CallResult, reason: string): void {
    this.#metrics?.calls.inc({ channel: this.#channel, provider: this.#provider, result, reason });
  }
}
