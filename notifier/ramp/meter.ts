/**
 * Per-provider send metrics, live and shadow, the figures a ramp is watched by (README,
 * "Replacing a provider"):
 *
 * - `provider_sends_total{channel,provider,result,shadow}`: every send handed to a provider by the
 *   delivery worker, `result` sent, retry, permanent or invalid_token (success rate = sent / all);
 * - `provider_send_seconds{channel,provider,shadow}`: how long each took;
 * - `provider_cost_total{channel,provider,shadow}`: the configured cost of each accepted send
 *   (PROVIDER_COSTS, in the currency it is given in); a push dry run (`validate_only`) delivers
 *   nothing and is not billed, so it adds no cost.
 *
 * `shadow` is `true` for the copies sent to a new provider beside the live send, `false` otherwise.
 */
import { Counter, Histogram, type Registry } from '../../shared/metrics.js';
import type { SendResult } from '../channels/channel.js';

type Labels = 'channel' | 'provider' | 'shadow';

export interface SendMeasure {
  channel: string;
  provider: string;
  shadow: boolean;
  /** A push dry run (`validate_only`): nothing was delivered, nothing billed. */
  dryRun?: boolean;
  seconds: number;
  result: SendResult;
}

export class ProviderMeter {
  readonly #sends: Counter<Labels | 'result'>;
  readonly #seconds: Histogram<Labels>;
  readonly #cost: Counter<Labels>;
  readonly #costs: ReadonlyMap<string, number>;

  /** `costs`: the cost of one accepted send, by provider name (a provider not listed costs 0). */
  constructor(registry: Registry, costs: ReadonlyMap<string, number>) {
    this.#costs = costs;
    this.#sends =
      (registry.getSingleMetric('provider_sends_total') as Counter<Labels | 'result'> | undefined) ??
      new Counter({
        name: 'provider_sends_total',
        help: 'Sends by the delivery worker per provider and result (sent, retry, permanent, invalid_token); shadow="true" for ramp shadow copies',
        labelNames: ['channel', 'provider', 'result', 'shadow'] as const,
        registers: [registry],
      });
    this.#seconds =
      (registry.getSingleMetric('provider_send_seconds') as Histogram<Labels> | undefined) ??
      new Histogram({
        name: 'provider_send_seconds',
        help: 'Time of each send by the delivery worker per provider; shadow="true" for ramp shadow copies',
        labelNames: ['channel', 'provider', 'shadow'] as const,
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
        registers: [registry],
      });
    this.#cost =
      (registry.getSingleMetric('provider_cost_total') as Counter<Labels> | undefined) ??
      new Counter({
        name: 'provider_cost_total',
        help: 'Configured cost (PROVIDER_COSTS) of the sends each provider accepted; shadow="true" for ramp shadow copies',
        labelNames: ['channel', 'provider', 'shadow'] as const,
        registers: [registry],
      });
  }

  /** Records one send. */
  measure(m: SendMeasure): void {
    const labels = { channel: m.channel, provider: m.provider, shadow: String(m.shadow) };
    const result = m.result.ok ? 'sent' : m.result.kind;
    this.#sends.inc({ ...labels, result });
    this.#seconds.observe(labels, m.seconds);
    const cost = this.#costs.get(m.provider) ?? 0;
    if (m.result.ok && !m.dryRun && cost > 0) this.#cost.inc(labels, cost);
  }
}
