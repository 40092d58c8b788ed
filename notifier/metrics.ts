/**
 * The notifier's metrics (README, "Metrics and alerts"), on the service's registry.
 *
 * Policies: `policy_decisions_total{type,channel,decision}`, `preference_fallback_total{stage}`,
 * `digest_batch_size{type}` (histogram) and `opt_out_rate{type}` (gauge, last 5 minutes).
 *
 * Raw series for Prometheus to compute over any window:
 * - `notification_ingest_total{priority,result}`: ingestion calls (`accepted`, `replayed` for an
 *   idempotent repeat, `rejected`);
 * - `send_latency_seconds{tier,channel}`: histogram from acceptance (the 202) to the provider
 *   accepting the send; p50/p95/p99 come from it (`histogram_quantile`);
 * - `delivery_outcomes_total{tier,channel,outcome}`: how attempts ended (`sent`, `retry`,
 *   `failover`, `secondary`, `failed`, `dead_lettered`);
 * - `provider_calls_total`, `provider_call_duration_seconds` and `circuit_breaker_state`: published
 *   by the channels themselves (notifier/channels/breaker.ts);
 * - `dlq_depth{channel}`: dead letters not yet re-driven, read from the database at scrape time;
 * - provider feedback (notifier/feedback): `webhook_events_total{provider,type,result}`,
 *   `webhook_rejected_total{provider,reason}` (signature failures among them),
 *   `webhook_unknown_messages_total{provider}`, `webhook_unknown_statuses_total{provider,status}`
 *   (a status we do not act on: `status` is one of the provider's documented values or `other`,
 *   so a signed caller cannot grow the series), `email_suppressions_added_total{reason}` and
 *   `suppressed_sends_total{channel}`.
 *
 * And, for dashboards that read /metrics directly, the rates the README lists, as gauges over a
 * sliding window
 * kept in process: `notification_ingest_rate` (accepted per second, last minute),
 * `delivery_success_rate{channel}` (sent / finished attempts, last 5 minutes) and
 * `provider_error_rate{provider}` (failed calls / calls, last 5 minutes).
 */
import type { Clock } from '../shared/clock.js';
import { Counter, Gauge, Histogram, type Registry } from '../shared/metrics.js';
import type { Logger } from '../shared/log.js';
import type { FeedbackMetrics } from './feedback/writer.js';

export type IngestResult = 'accepted' | 'replayed' | 'rejected';
export type DeliveryOutcome = 'sent' | 'retry' | 'failover' | 'secondary' | 'failed' | 'dead_lettered';

/** Counts per key in a sliding window of `buckets` slots. Fixed memory per key; time from the clock. */
export class SlidingCounter {
  readonly #slotMs: number;
  readonly #n: number;
  readonly #clock: Clock;
  readonly #series = new Map<string, { head: number; counts: Float64Array }>();

  constructor(windowMs: number, buckets: number, clock: Clock) {
    this.#slotMs = windowMs / buckets;
    this.#n = buckets;
    this.#clock = clock;
  }

  add(key: string, n = 1): void {
    const s = this.#roll(key);
    s.counts[s.head % this.#n]! += n;
  }

  sum(key: string): number {
    if (!this.#series.has(key)) return 0;
    const s = this.#roll(key);
    let total = 0;
    for (const c of s.counts) total += c;
    return total;
  }

  keys(): string[] {
    return [...this.#series.keys()];
  }

  #roll(key: string): { head: number; counts: Float64Array } {
    const slot = Math.floor(this.#clock.now() / this.#slotMs);
    let s = this.#series.get(key);
    if (!s) {
      s = { head: slot, counts: new Float64Array(this.#n) };
      this.#series.set(key, s);
      return s;
    }
    const steps = slot - s.head;
    if (steps > 0) {
      if (steps >= this.#n) s.counts.fill(0);
      else for (let i = 1; i <= steps; i++) s.counts[(s.head + i) % this.#n] = 0;
      s.head = slot;
    }
    return s;
  }
}

/** What the policies report (notifier/policy, workers/route.ts and workers/claim.ts). */
export interface PolicyMetrics {
  /** The preferences could not be read and nothing was cached: the conservative default applied to `n` sends. */
  preferenceFallback(stage: 'route' | 'check', n: number): void;
  /**
   * What a policy decided for one channel of one send: at routing (`send`, `opted_out`, `digest`)
   * and at the check before the provider call (`send`, `opted_out`, `capped` via `cap`,
   * `quiet_hours`, `digest`, `preferences_unavailable`).
   */
  policyDecision(type: string, channel: string, decision: string): void;
  /** A digest went out carrying `items` items. */
  digestFlushed(type: string, items: number): void;
  /** One channel chosen at routing, and whether the user's preferences turned it off (opt_out_rate). */
  routedChannel(type: string, optedOut: boolean): void;
}

/** What the campaign fan-out reports (notifier/campaigns/fanout.ts). */
export interface CampaignMetrics {
  /** A shard wrote the deliveries of `members` members in `seconds`. */
  shardExpanded(members: number, seconds: number): void;
}

export interface NotifierMetrics extends PolicyMetrics, CampaignMetrics, FeedbackMetrics {
  ingested(priority: string, result: IngestResult): void;
  outcome(tier: string, channel: string, outcome: DeliveryOutcome): void;
  /** A send the provider accepted, `seconds` after the notification was accepted. */
  sendLatency(tier: string, channel: string, seconds: number): void;
  /** One provider call's result (for the error rate). */
  providerCall(provider: string, failed: boolean): void;
}

export interface MetricsOptions {
  clock: Clock;
  /** Dead letters not re-driven, by channel; called at scrape time. */
  dlqDepth?: () => Promise<Record<string, number>>;
  /** How long the oldest fan-out still expanding has been at it, seconds (0: none); at scrape time. */
  fanoutLag?: () => Promise<number>;
  /** Campaigns with a fan-out waiting for approval; at scrape time (the console's overview). */
  campaignsPending?: () => Promise<number>;
  log?: Logger;
}

const RATE_WINDOW_MS = 60_000;
const SUCCESS_WINDOW_MS = 5 * 60_000;

export function createNotifierMetrics(registry: Registry, opts: MetricsOptions): NotifierMetrics {
  const ingest = new Counter({
    name: 'notification_ingest_total',
    help: 'Ingestion calls, by priority and result (accepted, replayed idempotent repeat, rejected)',
    labelNames: ['priority', 'result'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'send_latency_seconds',
    help: 'From acceptance (the 202) to the provider accepting the send, by tier and channel',
    labelNames: ['tier', 'channel'] as const,
    buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400],
    registers: [registry],
  });
  const outcomes = new Counter({
    name: 'delivery_outcomes_total',
    help: 'How delivery attempts ended: sent, retry, failover (push to sms), secondary (provider), failed, dead_lettered',
    labelNames: ['tier', 'channel', 'outcome'] as const,
    registers: [registry],
  });

  const fallbacks = new Counter({
    name: 'preference_fallback_total',
    help: 'Sends decided by the conservative default (push only) because the preferences could not be read, by stage (route, check)',
    labelNames: ['stage'] as const,
    registers: [registry],
  });
  const decisions = new Counter({
    name: 'policy_decisions_total',
    help: 'What the policies decided per channel of a send: send, opted_out, cap (capped), quiet_hours, digest, preferences_unavailable',
    labelNames: ['type', 'channel', 'decision'] as const,
    registers: [registry],
  });
  const digestSize = new Histogram({
    name: 'digest_batch_size',
    help: 'Items carried by each digest sent, by notification type',
    labelNames: ['type'] as const,
    buckets: [1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000],
    registers: [registry],
  });
  const routed = new SlidingCounter(SUCCESS_WINDOW_MS, 10, opts.clock);
  const optedOut = new SlidingCounter(SUCCESS_WINDOW_MS, 10, opts.clock);
  new Gauge({
    name: 'opt_out_rate',
    help: "Share of the channels chosen at routing that the user's preferences turned off, by notification type, over the last 5 minutes (this process)",
    labelNames: ['type'] as const,
    registers: [registry],
    collect() {
      for (const type of routed.keys()) {
        const n = routed.sum(type);
        if (n > 0) this.set({ type }, optedOut.sum(type) / n);
      }
    },
  });

  const accepted = new SlidingCounter(RATE_WINDOW_MS, 12, opts.clock);
  const finished = new SlidingCounter(SUCCESS_WINDOW_MS, 10, opts.clock);
  const succeeded = new SlidingCounter(SUCCESS_WINDOW_MS, 10, opts.clock);
  const calls = new SlidingCounter(SUCCESS_WINDOW_MS, 10, opts.clock);
  const callErrors = new SlidingCounter(SUCCESS_WINDOW_MS, 10, opts.clock);

  new Gauge({
    name: 'notification_ingest_rate',
    help: 'Notifications accepted per second over the last minute (this process)',
    registers: [registry],
    collect() {
      this.set(accepted.sum('all') / (RATE_WINDOW_MS / 1000));
    },
  });
  new Gauge({
    name: 'delivery_success_rate',
    help: 'Share of finished delivery attempts that were sent, by channel, over the last 5 minutes (this process)',
    labelNames: ['channel'] as const,
    registers: [registry],
    collect() {
      for (const channel of finished.keys()) {
        const n = finished.sum(channel);
        if (n > 0) this.set({ channel }, succeeded.sum(channel) / n);
      }
    },
  });
  new Gauge({
    name: 'provider_error_rate',
    help: 'Share of provider calls that failed (timeouts, 5xx, throttling, open breaker), by provider, over the last 5 minutes',
    labelNames: ['provider'] as const,
    registers: [registry],
    collect() {
      for (const provider of calls.keys()) {
        const n = calls.sum(provider);
        if (n > 0) this.set({ provider }, callErrors.sum(provider) / n);
      }
    },
  });
  const dlqDepth = opts.dlqDepth;
  new Gauge({
    name: 'dlq_depth',
    help: 'Dead letters waiting for inspection or re-drive, by channel',
    labelNames: ['channel'] as const,
    registers: [registry],
    async collect() {
      if (!dlqDepth) return;
      try {
        const depth = await dlqDepth();
        for (const channel of ['push', 'email', 'sms', 'in_app']) this.set({ channel }, depth[channel] ?? 0);
      } catch (err) {
        opts.log?.warn({ err }, 'dlq_depth: could not read the dead-letter queue');
      }
    },
  });

  const shardMembers = new Counter({
    name: 'fanout_recipients_total',
    help: 'Campaign members expanded into delivery records',
    registers: [registry],
  });
  const shardSeconds = new Histogram({
    name: 'fanout_shard_seconds',
    help: 'Time to expand one campaign shard (read members and policies, write deliveries, checkpoint)',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const fanoutLag = opts.fanoutLag;
  new Gauge({
    name: 'fanout_lag',
    help: 'Seconds the oldest campaign fan-out still expanding has been expanding (0 when none is)',
    registers: [registry],
    async collect() {
      if (!fanoutLag) return;
      try {
        this.set(await fanoutLag());
      } catch (err) {
        opts.log?.warn({ err }, 'fanout_lag: could not read the fan-outs');
      }
    },
  });

  const campaignsPending = opts.campaignsPending;
  new Gauge({
    name: 'campaigns_pending_approval',
    help: 'Campaigns with a fan-out held above NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD, waiting for an operator',
    registers: [registry],
    async collect() {
      if (!campaignsPending) return;
      try {
        this.set(await campaignsPending());
      } catch (err) {
        opts.log?.warn({ err }, 'campaigns_pending_approval: could not read the fan-outs');
      }
    },
  });

  // Provider feedback (notifier/feedback).
  const webhookEvents = new Counter({
    name: 'webhook_events_total',
    help: 'Provider webhook events by provider (ses, twilio), type (delivered, bounce_permanent, bounce_transient, complaint, undelivered, failed, progress, other, subscription, unreadable) and result (moved, recorded, duplicate, unknown, ignored, matched_late)',
    labelNames: ['provider', 'type', 'result'] as const,
    registers: [registry],
  });
  const webhookRejections = new Counter({
    name: 'webhook_rejected_total',
    help: 'Provider webhooks refused with nothing changed, by provider and reason (unsigned, bad_signature, cert_not_allowed, cert_unusable, cert_unavailable, topic_not_allowed, no_topics, stale, future, invalid, overloaded)',
    labelNames: ['provider', 'reason'] as const,
    registers: [registry],
  });
  const unknownMessages = new Counter({
    name: 'webhook_unknown_messages_total',
    help: 'Provider events for a message no delivery carries (answered 200), by provider',
    labelNames: ['provider'] as const,
    registers: [registry],
  });
  const unknownStatuses = new Counter({
    name: 'webhook_unknown_statuses_total',
    help: "Verified provider events with a status we do not act on (answered 200, recorded, no state change), by provider and status (one of the provider's documented statuses, else other)",
    labelNames: ['provider', 'status'] as const,
    registers: [registry],
  });
  const suppressions = new Counter({
    name: 'email_suppressions_added_total',
    help: 'Addresses put on the e-mail suppression list, by reason (bounce, complaint)',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const suppressedSends = new Counter({
    name: 'suppressed_sends_total',
    help: 'Sends not made because the address is on the suppression list, by channel',
    labelNames: ['channel'] as const,
    registers: [registry],
  });

  return {
    webhookEvent(provider, type, result) {
      webhookEvents.inc({ provider, type, result });
    },
    webhookRejected(provider, reason) {
      webhookRejections.inc({ provider, reason });
    },
    unknownMessage(provider) {
      unknownMessages.inc({ provider });
    },
    unknownStatus(provider, status) {
      unknownStatuses.inc({ provider, status });
    },
    suppressionAdded(reason) {
      suppressions.inc({ reason });
    },
    suppressedSend(channel) {
      suppressedSends.inc({ channel });
    },
    shardExpanded(members, seconds) {
      shardMembers.inc(members);
      shardSeconds.observe(seconds);
    },
    ingested(priority, result) {
      ingest.inc({ priority, result });
      if (result === 'accepted') accepted.add('all');
    },
    outcome(tier, channel, outcome) {
      outcomes.inc({ tier, channel, outcome });
      // A retry, failover or switch to the secondary is not the end of the delivery.
      if (outcome === 'sent' || outcome === 'failed' || outcome === 'dead_lettered') {
        finished.add(channel);
        if (outcome === 'sent') succeeded.add(channel);
      }
    },
    sendLatency(tier, channel, seconds) {
      latency.observe({ tier, channel }, Math.max(0, seconds));
    },
    providerCall(provider, failed) {
      calls.add(provider);
      if (failed) callErrors.add(provider);
    },
    preferenceFallback(stage, n) {
      fallbacks.inc({ stage }, n);
    },
    policyDecision(type, channel, decision) {
      decisions.inc({ type, channel, decision });
    },
    routedChannel(type, optedOutNow) {
      routed.add(type);
      if (optedOutNow) optedOut.add(type);
    },
    digestFlushed(type, items) {
      digestSize.observe({ type }, items);
    },
  };
}
