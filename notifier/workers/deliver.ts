/**
 * The delivery worker: one job = one attempt of one delivery (one channel, one recipient).
 *
 * 1. Claim: a conditional write `queued` → `sending` (delivery-sql.ts). A delivery already `sent`
 *    or further, failed, or held by another live worker is not sent again; its job is completed.
 * 2. Render the channel's content in the recipient's locale (the request's, else the profile's).
 *    A render error dead-letters this delivery and nothing else (`render_failed`); another locale
 *    is never tried.
 * 3. Call the provider, the delivery id travelling as its idempotency key (push: one key per
 *    device token). Push goes to every registered device of the user; tokens the provider calls
 *    dead are removed from the registry.
 * 4. Record the outcome and schedule what follows (retry-policy.ts) in one transaction with the
 *    job's completion: sent, a retry with `startAfter`, failover, the secondary provider, failed,
 *    or the dead-letter queue.
 *
 * The window that remains (README, "Delivery, retries, failover, the dead-letter queue"): a worker
 * that dies after the provider accepted a
 * send but before step 4 commits leaves the delivery `sending`. Its job expires and comes back;
 * the claim takes over once the lease (twice the send timeout, at most timeout + 5 s) has run out, and then asks the
 * provider, where it can (`Channel.lookup`; none of the shipped providers can), whether it already has a
 * message under this delivery's key; if so the delivery is recorded `sent` without a second send.
 * Where the provider cannot be asked (FCM, SMTP: neither takes an idempotency key) the send is
 * repeated, and the provider delivers twice. What the recipient sees of it: a push carries the
 * delivery id as its replace identifiers (channels/push-replace.ts), so the second copy replaces
 * the first on the device; an e-mail keeps its Message-ID, which some mailboxes de-duplicate on and
 * most clients list twice (README, "What a crash can still duplicate").
 */
import { createHash } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import { withTransaction, type Pool, type PoolClient } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import {
  isProviderFailure,
  type Channel,
  type ChannelName,
  type LookupResult,
  type OutboundMessage,
  type SendResult,
} from '../channels/channel.js';
import { isRenderError, isTemplateNotFoundError, type Rendered, type RenderRequest } from '../templates/index.js';
import type { Profile } from '../profiles/index.js';
import type { NotifierMetrics } from '../metrics.js';
import { txDb, type Boss, type Job } from '../queues/boss.js';
import type { Tier } from '../queues/names.js';
import { wakeDeliveries, type DeliveryJob } from '../queues/wake-ups.js';
import { signedPixelUrl, type PixelSigner } from '../tracking/pixel.js';
import {
  deliveryState,
  ensureDelivery,
  insertDeadLetter,
  markFailed,
  markRetry,
  releaseClaim,
  resumeParked,
  type ClaimedDelivery,
} from './delivery-sql.js';
import { SentBatch } from './sent-batch.js';
import { suppressedReason } from '../feedback/suppressions.js';
import { claimAndCheck, typeOfDelivery, type ClaimOptions } from './claim.js';
import { failoverTarget } from '../policy/failover.js';
import { combineTokenResults, nextStep, retryDelay, type AttemptOutcome, type DeadLetterReason, type TokenResult } from './retry-policy.js';
import type { ProviderRamp, ShadowPlan } from '../ramp/providers.js';

export type { DeliveryJob } from '../queues/wake-ups.js';

/** The primary channel of each kind, the configured secondaries and new providers being ramped in (notifier/channels/index.ts). */
export interface Channels {
  readonly primary: Readonly<Partial<Record<ChannelName, Channel>>>;
  readonly secondary: Readonly<Partial<Record<ChannelName, Channel>>>;
  readonly ramp?: Readonly<Partial<Record<ChannelName, Channel>>>;
}

/**
 * What the worker reads about recipients and templates (notifier/profiles, devices, templates).
 * Recipients are read for a whole fetched batch at once: one query for its profiles and one for
 * its push tokens, instead of one of each per send.
 */
export interface Directory {
  /** The profiles of these users; a user without one has no entry. */
  getProfiles(userIds: readonly string[]): Promise<Map<string, Profile>>;
  /** The push tokens of these users; a user without any has no entry. */
  listDeviceTokens(userIds: readonly string[]): Promise<Map<string, string[]>>;
  removeDeviceToken(userId: string, token: string): Promise<void>;
  renderTemplate(req: RenderRequest): Promise<Rendered>;
  /**
   * The suppressed ones among these e-mail addresses (notifier/feedback/suppressions.ts), keys
   * lower-cased: read once per claimed batch. Absent: nothing is suppressed.
   */
  suppressions?(addresses: readonly string[]): Promise<Map<string, Suppression>>;
}

/** Why an address is on the suppression list. */
export interface Suppression {
  reason: 'bounce' | 'complaint' | 'manual';
  /** Epoch seconds. */
  created_at: number;
}

export interface DeliveryWorkerOptions {
  pool: Pool;
  boss: Boss;
  channels: Channels;
  directory: Directory;
  metrics: NotifierMetrics;
  clock: Clock;
  log: Logger;
  /** Delays before retries 1, 2, … (NOTIFIER_RETRY_SCHEDULE). */
  retryScheduleMs: readonly number[];
  /** Deadline of one provider call (NOTIFIER_SEND_TIMEOUT). */
  sendTimeoutMs: number;
  /** Signs the e-mail open pixel's URL. */
  pixel: PixelSigner;
  /** Called after a commit that put work on `queue` due now. */
  wake: (queue: string) => void;
  /** The policies checked at the claim (workers/claim.ts). */
  policy: Pick<ClaimOptions, 'catalog' | 'settings' | 'prefsTimeoutMs' | 'unavailableRetryMs'>;
  /** Has this replica heard that the campaign was stopped (notifier/campaigns/kill-switch.ts)? */
  isStopped?: (campaignId: string | null) => boolean;
  /**
   * Which provider of a channel takes a delivery, its same-channel failover, shadow copies and the
   * per-provider metrics (notifier/ramp). Absent: the primary, then the configured secondary.
   */
  providers?: ProviderRamp;
}

/**
 * How long a `sending` claim is honoured before it counts as a crashed worker's: the send timeout
 * (a provider call never outlives it) plus as much again, at most 5 s, for the database writes.
 */
export function leaseMs(sendTimeoutMs: number): number {
  return sendTimeoutMs + Math.min(5_000, sendTimeoutMs);
}

/** States of a delivery that has reached its recipient or is on its way (a failover to it adds nothing). */
const REACHING: ReadonlySet<string> = new Set(['queued', 'sending', 'sent', 'delivered', 'opened', 'read', 'digested']);

/** How long a `sent` record waits for others to share its commit, and the most in one. */
const SENT_BATCH_DELAY_MS = 5;
const SENT_BATCH_MAX = 100;

/** A fetched batch after {@link DeliveryWorker.claim}: its claimed deliveries and their recipients. */
export interface ClaimedBatch {
  deliveries: Map<string, ClaimedDelivery>;
  /** Undefined when reading them failed: each send then reads its own. */
  recipients?: Recipients;
}

interface Recipients {
  profiles: Map<string, Profile>;
  tokens: Map<string, string[]>;
  /** The batch's suppressed e-mail addresses (lower-cased). */
  suppressed: Map<string, Suppression>;
}

/**
 * How an attempt ends: a send, recorded with others' in one transaction with their jobs
 * (sent-batch.ts); or writes that run in one transaction with this job's completion and return
 * the queues to poke.
 */
type Finish =
  | { kind: 'sent'; record: (queue: string, jobId: string) => Promise<void> }
  | { kind: 'writes'; run: (client: PoolClient) => Promise<string[]> };

const writes = (run: (client: PoolClient) => Promise<string[]>): Finish => ({ kind: 'writes', run });

export class DeliveryWorker {
  readonly #o: DeliveryWorkerOptions;
  readonly #leaseMs: number;
  readonly #sent: SentBatch;
  readonly #claims = new Set<Promise<unknown>>();
  readonly #shadows = new Set<Promise<void>>();

  constructor(opts: DeliveryWorkerOptions) {
    this.#o = opts;
    this.#sent = new SentBatch({ pool: opts.pool, boss: opts.boss, maxDelayMs: SENT_BATCH_DELAY_MS, maxItems: SENT_BATCH_MAX });
    this.#leaseMs = leaseMs(opts.sendTimeoutMs);
  }

  /**
   * Claims the deliveries of a fetched batch in one statement, then reads their recipients'
   * profiles and push tokens (see {@link handle}). The deliveries are claimed whatever happens to
   * the reads: a failed read leaves each send to read its own.
   */
  async claim(jobs: readonly Job<DeliveryJob>[], tier?: Tier): Promise<ClaimedBatch> {
    const deliveries = await this.#claim(
      jobs.map((j) => j.data.delivery_id),
      tier,
    );
    if (deliveries.size === 0) return { deliveries };
    const all = [...deliveries.values()];
    try {
      return { deliveries, recipients: await this.#recipients(all) };
    } catch (err) {
      this.#o.log.warn({ err }, 'reading the recipients of a batch failed; each send reads its own');
      return { deliveries };
    }
  }

  /** Shadow copies still in flight (a provider ramp's, never awaited by a delivery). */
  shadowsInFlight(): Promise<void>[] {
    return [...this.#shadows];
  }

  /** The provider that takes this delivery's live sends (the new one of a ramp for its share). */
  #live(d: ClaimedDelivery): Channel | undefined {
    const o = this.#o;
    return o.providers ? o.providers.live(d.channel, d.id) : o.channels.primary[d.channel];
  }

  /** The other provider of the same channel: the `secondary` step's. */
  #alternate(d: ClaimedDelivery, live: Channel | undefined): Channel | undefined {
    const o = this.#o;
    return o.providers ? o.providers.alternate(d.channel, live) : o.channels.secondary[d.channel];
  }

  /** The claims under way now: the kill switch waits for them before it acknowledges a stop. */
  claimsInFlight(): Promise<unknown>[] {
    return [...this.#claims];
  }

  /** The claim and the policy check before the provider call (claim.ts); pokes the queues it woke. */
  async #claim(ids: readonly string[], tier?: Tier): Promise<Map<string, ClaimedDelivery>> {
    const o = this.#o;
    const claim = claimAndCheck(
      { ...o.policy, pool: o.pool, boss: o.boss, clock: o.clock, leaseMs: this.#leaseMs, metrics: o.metrics, log: o.log },
      ids,
      tier,
    );
    this.#claims.add(claim);
    try {
      const { deliveries, wake } = await claim;
      for (const q of wake) o.wake(q);
      return deliveries;
    } finally {
      this.#claims.delete(claim);
    }
  }

  /** The campaign was stopped after this delivery was claimed: it goes no further. */
  #cancelled(d: ClaimedDelivery): Finish | undefined {
    if (!this.#o.isStopped?.(d.campaign_id)) return undefined;
    return writes(async (client) => {
      await client.query(
        `UPDATE deliveries SET status = 'cancelled', attempts = greatest(attempts - 1, 0), last_error = 'cancelled: the campaign was stopped',
                sending_since = NULL, next_attempt_at = NULL, updated_at = now()
          WHERE id = $1 AND status = 'sending'`,
        [d.id],
      );
      return [];
    });
  }

  async #recipients(ds: readonly ClaimedDelivery[]): Promise<Recipients> {
    const o = this.#o;
    const users = [...new Set(ds.map((d) => d.recipient_id))];
    const pushUsers = [...new Set(ds.filter((d) => d.channel === 'push').map((d) => d.recipient_id))];
    const [profiles, tokens] = await Promise.all([
      o.directory.getProfiles(users),
      pushUsers.length > 0 ? o.directory.listDeviceTokens(pushUsers) : new Map<string, string[]>(),
    ]);
    // The batch's e-mail addresses against the suppression list: one query per batch, not per send.
    const emails = ds.filter((d) => d.channel === 'email').flatMap((d) => profiles.get(d.recipient_id)?.email ?? []);
    const suppressed =
      emails.length > 0 && o.directory.suppressions ? await o.directory.suppressions(emails) : new Map<string, Suppression>();
    return { profiles, tokens, suppressed };
  }

  /**
   * Handles one job of `queue`; completes it unless it throws (then pg-boss retries it). `batch`
   * is the result of {@link claim} for its batch; without it the job claims for itself.
   */
  async handle(queue: string, job: Job<DeliveryJob>, batch?: ClaimedBatch): Promise<void> {
    const o = this.#o;
    const id = job.data.delivery_id;
    // A delivery with two jobs in one batch is attempted by the first only.
    const d = batch ? takeOnce(batch.deliveries, id) : (await this.#claim([id])).get(id);
    if (!d) {
      await this.#notClaimed(queue, job, id);
      return;
    }
    let finish: Finish;
    try {
      finish = this.#cancelled(d) ?? (await this.#attempt(d, batch?.recipients));
    } catch (err) {
      // Nothing reached a provider (an unexpected failure before the call): undo the claim so the
      // retried job can take it at once instead of waiting out the lease.
      await releaseClaim(o.pool, d.id).catch(() => {});
      throw err;
    }
    if (finish.kind === 'sent') {
      // Most attempts end here: recorded with others in one transaction with their jobs.
      await finish.record(queue, job.id);
      return;
    }
    const run = finish.run;
    const wake = await withTransaction(o.pool, async (client) => {
      const queues = await run(client);
      await o.boss.complete(queue, job.id, {}, { db: txDb(client) });
      return queues;
    });
    for (const q of wake) o.wake(q);
  }

  /** The claim found nothing to do: finish the job, or come back when a live claim's lease ends. */
  async #notClaimed(queue: string, job: Job<DeliveryJob>, id: string): Promise<void> {
    const o = this.#o;
    const state = await deliveryState(o.pool, id, this.#leaseMs);
    await withTransaction(o.pool, async (client) => {
      if (state?.status === 'sending') {
        // Another worker holds it (or died holding it): look again once its lease has run out.
        await this.#enqueue(client, state.channel, state.priority, id, state.leaseLeftMs + 100);
      }
      await o.boss.complete(queue, job.id, {}, { db: txDb(client) });
    });
  }

  /** Renders and sends; returns the writes that record the outcome. */
  async #attempt(d: ClaimedDelivery, known: Recipients | undefined): Promise<Finish> {
    const o = this.#o;
    const live = this.#live(d);
    const channel = d.use_secondary ? (this.#alternate(d, live) ?? live) : live;
    if (!channel) {
      return this.#decide(d, { kind: 'permanent', reason: 'provider_rejected', detail: `no ${d.channel} channel is configured` }, 'none');
    }

    // A claim that took over a crashed worker's send: ask the provider before sending again.
    // While the provider cannot be asked, the delivery stays `sending` (so the next attempt asks
    // again) for as long as the retry schedule lasts; after that it is sent again, as on a
    // provider without lookups.
    if (d.previous_status === 'sending' && channel.lookup && d.attempts <= o.retryScheduleMs.length + 1) {
      const found = await channel.lookup(d.id).catch((): LookupResult => ({ state: 'unknown', reason: 'provider_error' }));
      if (found.state === 'found') {
        o.log.info({ delivery: d.id, provider: channel.provider }, 'reconciled: the provider already had this send');
        return this.#decide(d, { kind: 'sent', providerMessageId: found.providerMessageId }, channel.provider);
      }
      if (found.state === 'unknown') return this.#lookupLater(d, found.reason);
    }

    const { profiles, tokens: allTokens, suppressed } = known ?? (await this.#recipients([d]));
    const profile = profiles.get(d.recipient_id);
    // An address a permanent bounce or a complaint put on the suppression list gets no more e-mail.
    const suppression = d.channel === 'email' && profile?.email ? suppressed.get(profile.email.toLowerCase()) : undefined;
    if (suppression) return this.#suppressed(d, suppression);
    let rendered: Rendered;
    try {
      rendered = await o.directory.renderTemplate({
        templateId: d.template_id,
        locale: d.locale ?? profile?.locale,
        channel: d.channel,
        data: d.digest ? {} : d.template_data,
        ...(d.digest ? { items: d.digest.items, count: d.digest.count } : {}),
      });
    } catch (err) {
      if (isRenderError(err)) return this.#deadLetter(d, 'render_failed', `${err.reason}: ${err.detail ?? err.message}`);
      if (isTemplateNotFoundError(err)) return this.#deadLetter(d, 'unknown_template', err.detail ?? err.message);
      throw err;
    }

    const msg: OutboundMessage = {
      to: '',
      recipientId: d.recipient_id,
      notificationId: d.notification_id,
      templateId: d.template_id,
      locale: rendered.locale,
      tier: d.priority,
      body: rendered.body,
    };
    if (rendered.title !== undefined) msg.title = rendered.title;
    if (rendered.subject !== undefined) msg.subject = rendered.subject;
    if (rendered.text !== undefined) msg.text = rendered.text;
    if (rendered.html !== undefined) msg.html = rendered.html;
    if (d.channel === 'push' || d.channel === 'in_app') {
      msg.data = { notification_id: d.notification_id, delivery_id: d.id, event_type: d.event_type };
    }
    // A shadow copy (a provider ramp's) carries no open pixel: a test recipient's open is not the user's.
    const shadowMsg: OutboundMessage = { ...msg };
    if (d.channel === 'email' && msg.html !== undefined) msg.html = withPixel(msg.html, signedPixelUrl(o.pixel, d.id));

    // Rendering took a moment: a stop heard meanwhile still keeps this send from the provider.
    const stopped = this.#cancelled(d);
    if (stopped) return stopped;

    const deadlineMs = o.sendTimeoutMs;
    const call = async (to: string, idempotencyKey: string): Promise<SendResult> => {
      const started = o.clock.now();
      const r = await channel.send({ ...msg, to }, { deliveryId: d.id, idempotencyKey, deadlineMs });
      o.metrics.providerCall(channel.provider, isProviderFailure(r));
      o.providers?.meter.measure({
        channel: d.channel,
        provider: channel.provider,
        shadow: false,
        seconds: (o.clock.now() - started) / 1000,
        result: r,
      });
      return r;
    };
    // A share of the old provider's first attempts is also sent to a new provider being ramped in,
    // where it reaches no one: measured, never awaited, never recorded on the delivery.
    const plan =
      !d.use_secondary && d.attempts === 1 && channel === o.channels.primary[d.channel]
        ? o.providers?.shadow(d.channel, d.id, d.priority)
        : undefined;
    const shadow = (to: string): void => {
      if (plan) this.#shadow(d, plan, { ...shadowMsg, to: plan.to ?? to });
    };

    let outcome: AttemptOutcome;
    switch (d.channel) {
      case 'push': {
        const tokens = allTokens.get(d.recipient_id) ?? [];
        // One dry run per delivery, to its first device: enough to measure the new provider.
        if (tokens[0] !== undefined) shadow(tokens[0]);
        const results = (await Promise.all(tokens.map((t) => call(t, `${d.id}:${tokenHash(t)}`)))) as TokenResult[];
        const combined = combineTokenResults(results);
        for (const token of combined.deadTokens) {
          await o.directory.removeDeviceToken(d.recipient_id, token).catch((err: unknown) => {
            o.log.warn({ err, delivery: d.id }, 'could not remove a dead device token');
          });
        }
        // Sends of this batch that have not read the list yet skip the pruned tokens too (filtering
        // the list as it is now, which another send may have pruned already).
        if (combined.deadTokens.length > 0) {
          const current = allTokens.get(d.recipient_id) ?? [];
          allTokens.set(
            d.recipient_id,
            current.filter((t) => !combined.deadTokens.includes(t)),
          );
        }
        outcome = combined.outcome;
        break;
      }
      case 'email':
      case 'sms': {
        const to = d.channel === 'email' ? profile?.email : profile?.phone;
        if (!to) {
          outcome = {
            kind: 'permanent',
            reason: 'missing_address',
            detail: `the user has no ${d.channel === 'email' ? 'e-mail address' : 'phone number'}`,
          };
          break;
        }
        shadow(to);
        outcome = toOutcome(await call(to, d.id));
        break;
      }
      case 'in_app':
        outcome = toOutcome(await call(d.recipient_id, d.id));
        break;
    }
    return this.#decide(d, outcome, channel.provider, profile);
  }

  /** Turns an attempt's outcome into the writes that record it and schedule what follows. */
  #decide(d: ClaimedDelivery, outcome: AttemptOutcome, provider: string, profile?: Profile): Finish {
    const o = this.#o;
    const live = this.#live(d);
    const step = nextStep(outcome, {
      tier: d.priority,
      channel: d.channel,
      attempts: d.attempts,
      scheduleMs: o.retryScheduleMs,
      usedSecondary: d.use_secondary,
      hasSecondary: this.#alternate(d, live) !== undefined,
      onNewProvider: live !== undefined && o.providers?.isNew(d.channel, live) === true,
      failedOver: d.failed_over_to !== null || d.is_failover,
      // The type's failover list under the type × tier table (marketing never goes out by SMS),
      // to a channel configured here that the recipient has an address on.
      failoverTo:
        outcome.kind === 'sent'
          ? undefined
          : failoverTarget(typeOfDelivery(o.policy.catalog, d), d.priority, d.channel, {
              settings: o.policy.settings,
              configured: (c) => o.channels.primary[c] !== undefined,
              profile,
            }),
    });
    const detail = outcome.kind === 'sent' ? '' : outcome.detail ? `${outcome.reason}: ${outcome.detail}` : outcome.reason;
    switch (step.do) {
      case 'sent': {
        const counted = (moved: boolean): void => {
          if (!moved) return;
          o.metrics.outcome(d.priority, d.channel, 'sent');
          o.metrics.sendLatency(d.priority, d.channel, (o.clock.now() - d.accepted_at_ms) / 1000);
        };
        return {
          kind: 'sent',
          record: async (queue, jobId) =>
            counted(await this.#sent.add({ deliveryId: d.id, provider, providerMessageId: step.providerMessageId, queue, jobId })),
        };
      }
      case 'retry':
        return writes(async (client) => {
          if (!(await markRetry(client, d.id, step.delayMs, detail))) return [];
          o.metrics.outcome(d.priority, d.channel, 'retry');
          return this.#enqueue(client, d.channel, d.priority, d.id, step.delayMs);
        });
      case 'secondary':
        return writes(async (client) => {
          if (!(await markRetry(client, d.id, 0, detail, true))) return [];
          o.metrics.outcome(d.priority, d.channel, 'secondary');
          return this.#enqueue(client, d.channel, d.priority, d.id, 0);
        });
      case 'failover':
        return writes(async (client) => {
          const other = await ensureDelivery(client, {
            notificationId: d.notification_id,
            channel: step.to,
            recipientId: d.recipient_id,
            priority: d.priority,
            templateId: d.template_id,
          });
          const error = `failed_over_to_${step.to}: ${step.after ? `${step.after}: ${detail}` : detail}`;
          // Its own retries spent: it goes to the dead-letter queue (an operator sees the failing
          // provider and can re-drive it) while the other channel is tried. At once (transactional
          // push) or on refused credentials it is parked instead, and resumes if the other fails.
          if (!(await markFailed(client, d.id, step.after ? 'dead_lettered' : 'failed', error, other.id))) return [];
          if (step.after) {
            const dl = `${detail} (failed over to ${step.to})`;
            await insertDeadLetter(client, {
              deliveryId: d.id,
              channel: d.channel,
              priority: d.priority,
              reason: step.after,
              detail: dl,
              attempts: d.attempts,
            });
            o.log.warn({ delivery: d.id, channel: d.channel, reason: step.after, to: step.to }, 'delivery dead-lettered, failed over');
          }
          o.metrics.outcome(d.priority, d.channel, 'failover');
          const wake: string[] = [];
          if (other.created) wake.push(...(await this.#enqueue(client, step.to, d.priority, other.id, 0)));
          // That channel already ended without reaching the user: a parked delivery keeps its own
          // retries. (One already sent or under way, a channel the notification had anyway, is not
          // sent again: the user has it, or will.)
          else if (!REACHING.has(other.status)) wake.push(...(await this.#resume(client, other.id)));
          return wake;
        });
      case 'fail':
        return writes(async (client) => {
          if (!(await markFailed(client, d.id, 'failed', detail))) return [];
          o.metrics.outcome(d.priority, d.channel, 'failed');
          return this.#resume(client, d.id);
        });
      case 'dead_letter':
        return this.#deadLetter(d, step.reason, detail);
    }
  }

  /** The address is on the suppression list: the delivery ends `suppressed`, with the reason. */
  #suppressed(d: ClaimedDelivery, s: Suppression): Finish {
    const o = this.#o;
    return writes(async (client) => {
      const r = await client.query(
        `UPDATE deliveries SET status = 'suppressed', attempts = greatest(attempts - 1, 0), last_error = $2,
                sending_since = NULL, next_attempt_at = NULL, updated_at = now()
          WHERE id = $1 AND status = 'sending'`,
        [d.id, suppressedReason(s)],
      );
      if ((r.rowCount ?? 0) > 0) o.metrics.suppressedSend(d.channel);
      return [];
    });
  }

  /**
   * Sends a shadow copy to a new provider: a push dry run to the user's device, or an e-mail or SMS
   * to a test recipient, under its own delivery id (`<id>.shadow`), so nothing the provider
   * reports about it joins the delivery. Measured, with `shadow="true"`; its result changes nothing.
   */
  #shadow(d: ClaimedDelivery, plan: ShadowPlan, msg: OutboundMessage): void {
    const o = this.#o;
    const meter = o.providers?.meter;
    const id = `${d.id}.shadow`;
    const started = o.clock.now();
    const p = plan.channel
      .send(msg, { deliveryId: id, idempotencyKey: id, deadlineMs: o.sendTimeoutMs, dryRun: plan.dryRun })
      .then((result) => {
        meter?.measure({
          channel: d.channel,
          provider: plan.channel.provider,
          shadow: true,
          dryRun: plan.dryRun,
          seconds: (o.clock.now() - started) / 1000,
          result,
        });
      })
      .catch((err: unknown) => o.log.warn({ err, delivery: d.id, provider: plan.channel.provider }, 'a shadow send failed'))
      .finally(() => this.#shadows.delete(p));
    this.#shadows.add(p);
  }

  /** Leaves the delivery `sending` with its lease already spent and comes back on the retry schedule to ask again. */
  #lookupLater(d: ClaimedDelivery, reason: string): Finish {
    return writes(async (client) => {
      const r = await client.query(
        `UPDATE deliveries SET sending_since = now() - make_interval(secs => $2::double precision / 1000), last_error = $3, updated_at = now()
          WHERE id = $1 AND status = 'sending'`,
        [d.id, this.#leaseMs + 1000, `reconciliation_pending: ${reason}`],
      );
      if ((r.rowCount ?? 0) === 0) return [];
      this.#o.metrics.outcome(d.priority, d.channel, 'retry');
      return this.#enqueue(client, d.channel, d.priority, d.id, retryDelay(this.#o.retryScheduleMs, d.attempts));
    });
  }

  #deadLetter(d: ClaimedDelivery, reason: DeadLetterReason, detail: string): Finish {
    const o = this.#o;
    return writes(async (client) => {
      if (!(await markFailed(client, d.id, 'dead_lettered', `${reason}: ${detail}`))) return [];
      await insertDeadLetter(client, { deliveryId: d.id, channel: d.channel, priority: d.priority, reason, detail, attempts: d.attempts });
      o.metrics.outcome(d.priority, d.channel, 'dead_lettered');
      o.log.warn({ delivery: d.id, channel: d.channel, reason }, 'delivery dead-lettered');
      return this.#resume(client, d.id);
    });
  }

  /** Deliveries parked behind `failoverId` (which has now failed) go back to their own retries. */
  async #resume(client: PoolClient, failoverId: string): Promise<string[]> {
    const wake: string[] = [];
    for (const p of await resumeParked(client, failoverId)) {
      wake.push(...(await this.#enqueue(client, p.channel, p.priority, p.id, retryDelay(this.#o.retryScheduleMs, p.attempts))));
    }
    return wake;
  }

  /** Wakes a worker for the next attempt of `deliveryId` after `delayMs`; returns the queue to poke when due now. */
  #enqueue(client: PoolClient, channel: ChannelName, tier: Tier, deliveryId: string, delayMs: number): Promise<string[]> {
    return wakeDeliveries(client, this.#o.boss, [{ deliveryId, channel, tier, delayMs }]);
  }
}

function takeOnce<K, V>(m: Map<K, V>, k: K): V | undefined {
  const v = m.get(k);
  m.delete(k);
  return v;
}

/** A single-address send result as an attempt outcome. */
function toOutcome(r: SendResult): AttemptOutcome {
  if (r.ok) return { kind: 'sent', providerMessageId: r.providerMessageId };
  if (r.kind === 'invalid_token') return { kind: 'permanent', reason: 'invalid_recipient', detail: r.detail };
  if (r.kind === 'retry') {
    const o: AttemptOutcome = { kind: 'retry', reason: r.reason };
    if (r.retryAfterMs !== undefined) o.retryAfterMs = r.retryAfterMs;
    if (r.detail !== undefined) o.detail = r.detail;
    return o;
  }
  return { kind: 'permanent', reason: r.reason, detail: r.detail };
}

/** A short, stable hash of a device token: the per-token part of a push send's idempotency key. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('base64url').slice(0, 16);
}

/** The open pixel, inside the body when there is one. */
export function withPixel(html: string, pixelUrl: string): string {
  const img = `<img src="${pixelUrl}" width="1" height="1" alt="" style="display:none">`;
  const i = html.toLowerCase().lastIndexOf('</body>');
  return i < 0 ? html + img : html.slice(0, i) + img + html.slice(i);
}
