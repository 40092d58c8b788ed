/**
 * The notifier's core, started in-process by main.ts and by tests: its schema (migrations), the
 * HTTP API (ingestion, status, tracking, inbox, dead-letter queue; templates, profiles and devices
 * from their own modules), pg-boss on the service's pool, and the worker pools: one routing queue
 * per tier and one delivery queue per channel × tier, each with its own loop and concurrency.
 *
 * Built, then served: (1) the pool and migrations, (2) the domain on it: pg-boss and its queues,
 * the channels, the workers (built, not yet running), (3) the HTTP service, whose routes receive
 * those finished objects, (4) the workers start. Close order: stop accepting requests, stop the
 * workers (finishing the sends in flight, up to the grace period), stop pg-boss, close the
 * channels' pools, end the database pool.
 */
import { systemClock, type Clock } from '../shared/clock.js';
import type { Pool } from '../shared/db.js';
import { createVerifier } from '../shared/jwt/index.js';
import type { Logger } from '../shared/log.js';
import type { Started } from '../shared/main.js';
import { createRegistry } from '../shared/metrics.js';
import { openDatabase, postgresCheck, requireDatabaseUrl } from '../shared/pg-service.js';
import { startHttpService, type HttpService } from '../shared/service.js';
import type { NotifierConfig } from './config.js';
import { createCallerResolver } from './caller.js';
import { createChannels, type WriteInbox } from './channels/index.js';
import { registerTemplateRoutes, renderTemplate, markTemplateUsed } from './templates/index.js';
import { getProfiles, registerProfileRoutes } from './profiles/index.js';
import { listDeviceTokensOf, removeDeviceToken, registerDeviceRoutes } from './devices/index.js';
import { createNotifierMetrics } from './metrics.js';
import { registerIngestRoutes } from './ingest/routes.js';
import { registerTrackingRoutes } from './tracking/routes.js';
import { registerDlqRoutes } from './admin/routes.js';
import { registerAdminNotificationRoutes } from './admin/notification-routes.js';
import { notifierOpenApi } from './openapi.js';
import { serveOpenApi } from '../shared/openapi.js';
import { dlqDepth } from './admin/dlq.js';
import { writeInbox } from './tracking/inbox.js';
import { pixelSigner } from './tracking/pixel.js';
import { runRetention } from './tracking/retention.js';
import { startBoss, type Boss } from './queues/boss.js';
import { QueueRunner } from './queues/runner.js';
import { QueueWatch } from './queues/watch.js';
import { Backpressure } from './queues/backpressure.js';
import { CAMPAIGN_TIERS, CHANNEL_NAMES, RETENTION_QUEUE, TIERS, campaignQueue, deliverQueue, routeQueue } from './queues/names.js';
import type { CampaignJob } from './queues/wake-ups.js';
import {
  CAMPAIGN_STOP_CHANNEL,
  CampaignPump,
  CampaignWorker,
  fanoutLag,
  campaignsPendingApproval,
  KillSwitch,
  registerCampaignRoutes,
  ShardRescue,
} from './campaigns/index.js';
import { DeliveryWorker, leaseMs, type Channels, type ClaimedBatch, type DeliveryJob, type Directory } from './workers/deliver.js';
import { RoutingWorker, type RouteJob } from './workers/route.js';
import { PgListener } from '../shared/pg-listener.js';
import { loadRamps, ProviderMeter, ProviderRamp, RAMP_CHANNEL, registerRampRoutes } from './ramp/index.js';
import { loadPreferences, PreferenceCache, PREFERENCES_CHANNEL, registerPreferenceRoutes } from './preferences/index.js';
import type { PolicySettings } from './policy/table.js';
import { Reconciler } from './workers/reconcile.js';
import { registerSegmentRoutes, SegmentCleanup, UPLOAD_STALE_MS } from './segments/index.js';
import type { BodyStream } from '../shared/body-stream.js';
import {
  CertCache,
  FeedbackWriter,
  httpCertFetch,
  registerSuppressionRoutes,
  registerWebhookRoutes,
  suppressedAmong,
  TWILIO_WEBHOOK_PATH,
} from './feedback/index.js';

/** What tests (and embedders) may replace. */
export interface NotifierDeps {
  /**
   * Channels to use instead of the ones built from configuration; a function gets the inbox writer
   * the in_app channel needs.
   */
  channels?: (Channels & { close?: () => Promise<void> }) | ((writeInbox: WriteInbox) => Channels & { close?: () => Promise<void> });
  /** Replaces parts of the recipient and template lookups. */
  directory?: Partial<Directory>;
  clock?: Clock;
  /** Sees the body reader of each segment upload (tests assert its high-water mark). */
  onSegmentUploadBody?: (body: BodyStream) => void;
  /** Provider events written per transaction at most (feedback/writer.ts; default 500): the webhook bench compares 1. */
  feedbackBatch?: number;
}

export interface Notifier extends Started {
  port: number;
  pool: Pool;
  boss: Boss;
  /** Replaces lost queue wake-ups (workers/reconcile.ts); undefined without workers. */
  reconciler: Reconciler | undefined;
  /** Load shedding state (which tiers are deferred). */
  backpressure: Backpressure;
  /** This replica's preference cache (notifier/preferences/cache.ts). */
  preferences: PreferenceCache;
  /** The segment clean-up (notifier/segments/cleanup.ts). */
  segmentCleanup: SegmentCleanup;
}

/** Users whose preferences one replica keeps cached at most. */
const PREFERENCE_CACHE_ENTRIES = 100_000;

/** How often the backlog of the urgent queues is sampled for load shedding. */
const BACKPRESSURE_SAMPLE_MS = 500;
/** Between the campaign pump's top-ups while a campaign is draining. */
const CAMPAIGN_PUMP_BUSY_MS = 50;
/** A progress line per this many shards of a fan-out. */
const CAMPAIGN_LOG_EVERY_SHARDS = 100;
/**
 * An empty queue's runner waits for the queue watch (queues/watch.ts) to wake it; if no wake-up
 * comes (the watch's statement failing), it fetches again after this long.
 */
const EMPTY_QUEUE_BACKSTOP_MS = 30_000;
/** Provider events that named no delivery are matched again this often, while this young. */
const FEEDBACK_REMATCH_MS = 2_000;
const FEEDBACK_REMATCH_WITHIN_MS = 10 * 60_000;
/** Longest wait for an SNS signing certificate. */
const SNS_CERT_FETCH_TIMEOUT_MS = 5_000;

export async function startNotifier(config: NotifierConfig, log: Logger, deps: NotifierDeps = {}): Promise<Notifier> {
  const clock = deps.clock ?? systemClock;
  const registry = createRegistry('notifier');

  // 1. The database.
  const pool = await openDatabase({
    name: 'notifier',
    dir: 'notifier',
    databaseUrl: config.DATABASE_URL,
    poolMax: config.DATABASE_POOL_MAX,
    log,
  });

  // 2. The domain: who is calling, tracking links, metrics, pg-boss and its queues, the channels,
  // the workers (built, not yet running).
  const caller = createCallerResolver({
    serviceSecret: config.SERVICE_SECRET,
    serviceRoles: config.NOTIFIER_SERVICE_ROLES,
    verifier: () =>
      createVerifier({
        issuer: config.JWT_ISSUER,
        audience: config.JWT_AUDIENCE,
        jwksUrl: config.JWKS_URL ?? `${config.IDENTITY_URL}/.well-known/jwks.json`,
        clockToleranceSec: Math.round(config.JWT_CLOCK_SKEW / 1000),
        jwksCooldownMs: config.JWKS_REFETCH_COOLDOWN,
        log,
      }),
  });
  const pixel = pixelSigner(config.NOTIFIER_TRACKING_SECRET, config.NOTIFIER_PUBLIC_URL);
  if (config.NOTIFIER_TRACKING_SECRET === undefined) {
    log.warn('NOTIFIER_TRACKING_SECRET is unset: open-pixel links are signed with a per-process key and stop counting after a restart');
  }

  const metrics = createNotifierMetrics(registry, {
    clock,
    log,
    dlqDepth: () => dlqDepth(pool),
    fanoutLag: () => fanoutLag(pool),
    campaignsPending: () => campaignsPendingApproval(pool),
  });
  // Provider feedback (notifier/feedback): the webhooks' batched writer and the SNS certificates.
  const certPolicy = { hostPattern: config.NOTIFIER_SNS_CERT_HOSTS, httpHosts: config.NOTIFIER_SNS_CERT_HTTP_HOSTS ?? [] };
  const certs = new CertCache({
    policy: certPolicy,
    ttlMs: config.NOTIFIER_SNS_CERT_TTL,
    clock,
    fetch: httpCertFetch(SNS_CERT_FETCH_TIMEOUT_MS),
  });
  const feedback = new FeedbackWriter({ pool, metrics, log, ...(deps.feedbackBatch !== undefined && { maxItems: deps.feedbackBatch }) });
  // What configuration turned off: one line at start, and /readyz's `detail` (readiness unchanged:
  // the rest of the notifier works).
  const off: Record<string, string> = {};
  if ((config.NOTIFIER_SES_TOPIC_ARNS ?? []).length === 0) {
    off.ses_webhook = 'off: NOTIFIER_SES_TOPIC_ARNS is unset, so the SES events webhook refuses every SNS message (403)';
  }
  if (Object.keys(off).length > 0) log.warn({ off }, `turned off by configuration: ${Object.keys(off).join(', ')}`);
  const runners = new Map<string, Pick<QueueRunner, 'wake' | 'start' | 'stop'>>();
  const wake = (queue: string): void => runners.get(queue)?.wake();
  let pressure = 0;
  const backpressure = new Backpressure({
    pool,
    queues: ['transactional', 'high'].flatMap((t) => [
      routeQueue(t as 'transactional' | 'high'),
      ...CHANNEL_NAMES.map((c) => deliverQueue(c, t as 'transactional' | 'high')),
    ]),
    threshold: config.NOTIFIER_BACKPRESSURE_THRESHOLD,
    intervalMs: BACKPRESSURE_SAMPLE_MS,
    log,
    // A deferred runner pauses for its tier's idle poll (2 s for low): wake them all as soon as the
    // pressure eases, or a campaign's shards wait seconds after every transactional burst
    // (bench/RESULTS.md, "Campaign fan-out": 146 s → 91 s for a million members).
    onChange: (level) => {
      if (level < pressure) for (const r of runners.values()) r.wake();
      pressure = level;
    },
  });
  // The policies: the type catalogue, the tier table's settings, each replica's preference cache
  // and the LISTEN connection that keeps it honest (notifier/preferences/cache.ts).
  const catalog = config.NOTIFIER_NOTIFICATION_TYPES;
  const settings: PolicySettings = { quietHoursTiers: config.NOTIFIER_QUIET_HOURS_TIERS };
  const preferences = new PreferenceCache({
    ttlMs: config.NOTIFIER_PREFERENCES_TTL,
    maxEntries: PREFERENCE_CACHE_ENTRIES,
    clock,
    // The listener is built just below; this is only called once it exists.
    listening: () => listener.connected,
    load: (ids) => loadPreferences(pool, ids),
  });
  // The kill switch of this replica (built with the workers; notifier/campaigns/kill-switch.ts).
  let killSwitch: KillSwitch | undefined;
  // Which provider of a channel takes a delivery (notifier/ramp), built with the channels.
  let ramp: ProviderRamp | undefined;
  const rampReload = (): void => {
    void ramp?.reload().catch((err: unknown) => log.warn({ err }, 'provider ramp: rereading the weights failed'));
  };
  const listener = new PgListener({
    url: requireDatabaseUrl(config.DATABASE_URL, 'notifier'),
    channels: [PREFERENCES_CHANNEL, CAMPAIGN_STOP_CHANNEL, RAMP_CHANNEL],
    applicationName: 'notifier:listen',
    log,
    onNotification: (channel, payload) => {
      if (channel === CAMPAIGN_STOP_CHANNEL) {
        void killSwitch
          ?.onStop(payload)
          .catch((err: unknown) => log.warn({ err, campaign: payload }, 'kill switch: handling a stop failed'));
      } else if (channel === RAMP_CHANNEL) rampReload();
      else preferences.invalidate(payload);
    },
    onConnect: () => {
      preferences.clear();
      // A stop sent while this connection was down was missed: read them all again.
      void killSwitch?.reload().catch((err: unknown) => log.warn({ err }, 'kill switch: reloading the stopped campaigns failed'));
      rampReload();
    },
  });
  const segmentCleanup = new SegmentCleanup({ pool, log, staleMs: UPLOAD_STALE_MS });
  const lease = leaseMs(config.NOTIFIER_SEND_TIMEOUT);
  const graceMs = config.SHUTDOWN_GRACE;
  let boss: Boss | undefined;
  let channels: (Channels & { close?: () => Promise<void> }) | undefined;
  let http: HttpService | undefined;
  let reconciler: Reconciler | undefined;
  let pump: CampaignPump | undefined;
  let watch: QueueWatch | undefined;
  // Hands a dead replica's campaign shards on within a few heartbeats (campaigns/shard-rescue.ts).
  let shardRescue: ShardRescue | undefined;
  try {
    await listener.start();
    boss = await startBoss({
      pool,
      log,
      jobExpireMs: config.NOTIFIER_JOB_EXPIRE,
      maintenanceMs: config.NOTIFIER_QUEUE_MAINTENANCE,
      schedule: config.NOTIFIER_WORKERS,
    });
    const b = boss;
    const inbox: WriteInbox = (msg, ctx) => writeInbox(pool, msg, ctx);
    channels =
      typeof deps.channels === 'function'
        ? deps.channels(inbox)
        : (deps.channels ??
          createChannels(config, {
            writeInbox: inbox,
            sendTimeoutMs: config.NOTIFIER_SEND_TIMEOUT,
            clock,
            registry,
            smsStatusCallback: `${config.NOTIFIER_PUBLIC_URL.replace(/\/+$/, '')}${TWILIO_WEBHOOK_PATH}`,
          }));
    const providers = new ProviderRamp({
      channels,
      load: () => loadRamps(pool),
      testRecipients: { email: config.NOTIFIER_RAMP_TEST_EMAILS ?? [], sms: config.NOTIFIER_RAMP_TEST_PHONES ?? [] },
      meter: new ProviderMeter(registry, config.PROVIDER_COSTS ?? new Map()),
      pollMs: config.NOTIFIER_RAMP_POLL,
      log,
    });
    ramp = providers;
    await providers.start();

    if (config.NOTIFIER_WORKERS) {
      const directory: Directory = {
        getProfiles: (ids) => getProfiles(pool, ids),
        listDeviceTokens: (ids) => listDeviceTokensOf(pool, ids),
        removeDeviceToken: (id, token) => removeDeviceToken(pool, id, token),
        renderTemplate: (req) => renderTemplate(pool, req),
        suppressions: (addresses) => suppressedAmong(pool, addresses),
        ...deps.directory,
      };
      const router = new RoutingWorker({
        pool,
        boss: b,
        log,
        wake,
        catalog,
        settings,
        preferences,
        prefsTimeoutMs: config.NOTIFIER_PREFERENCES_TIMEOUT,
        metrics,
        clock,
      });
      const deliverer = new DeliveryWorker({
        pool,
        boss: b,
        channels,
        directory,
        metrics,
        clock,
        log,
        retryScheduleMs: config.NOTIFIER_RETRY_SCHEDULE,
        sendTimeoutMs: config.NOTIFIER_SEND_TIMEOUT,
        pixel,
        wake,
        policy: {
          catalog,
          settings,
          prefsTimeoutMs: config.NOTIFIER_PREFERENCES_TIMEOUT,
          unavailableRetryMs: config.NOTIFIER_RETRY_SCHEDULE[0] ?? 1_000,
        },
        isStopped: (campaignId) => killSwitch?.isStopped(campaignId) ?? false,
        providers,
      });
      killSwitch = new KillSwitch({
        pool,
        log,
        heartbeatMs: config.NOTIFIER_REPLICA_HEARTBEAT,
        claimsInFlight: () => deliverer.claimsInFlight(),
      });
      const campaignPump = new CampaignPump({
        pool,
        boss: b,
        log,
        depth: config.NOTIFIER_CAMPAIGN_QUEUE_DEPTH,
        idleMs: config.NOTIFIER_CAMPAIGN_PUMP_IDLE,
        busyMs: CAMPAIGN_PUMP_BUSY_MS,
        mayRun: (tier) => backpressure.mayRun(tier),
        wake,
      });
      pump = campaignPump;
      const campaigns = new CampaignWorker({
        pool,
        boss: b,
        log,
        clock,
        catalog,
        settings,
        shardSize: config.NOTIFIER_CAMPAIGN_SHARD_SIZE,
        approvalThreshold: config.NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD,
        logEveryShards: CAMPAIGN_LOG_EVERY_SHARDS,
        metrics,
        expanded: () => campaignPump.poke(),
        wake,
        replicaId: killSwitch.replicaId,
      });
      shardRescue = new ShardRescue({ pool, boss: b, log, heartbeatMs: config.NOTIFIER_REPLICA_HEARTBEAT, wake });
      // Each runner's queue with its idle poll period, for the queue watch.
      const polled = new Map<string, number>();
      for (const tier of CAMPAIGN_TIERS) {
        const cq = campaignQueue(tier);
        polled.set(cq, config.NOTIFIER_IDLE_POLL[tier]);
        runners.set(
          cq,
          new QueueRunner<CampaignJob>({
            boss: b,
            queue: cq,
            concurrency: config.NOTIFIER_CAMPAIGN_CONCURRENCY,
            idleMs: config.NOTIFIER_IDLE_POLL[tier],
            emptyMs: EMPTY_QUEUE_BACKSTOP_MS,
            // A campaign is shed first under pressure, like the rest of its tier: it never delays transactional sends.
            mayFetch: () => backpressure.mayRun(tier),
            handle: (job) => campaigns.handle(cq, job),
            log,
          }),
        );
      }
      for (const tier of TIERS) {
        const common = {
          boss: b,
          concurrency: config.NOTIFIER_CONCURRENCY[tier],
          idleMs: config.NOTIFIER_IDLE_POLL[tier],
          emptyMs: EMPTY_QUEUE_BACKSTOP_MS,
          mayFetch: () => backpressure.mayRun(tier),
          log,
        };
        const rq = routeQueue(tier);
        polled.set(rq, config.NOTIFIER_IDLE_POLL[tier]);
        runners.set(rq, new QueueRunner<RouteJob>({ ...common, queue: rq, handleBatch: (jobs) => router.handleBatch(rq, jobs) }));
        for (const channel of CHANNEL_NAMES) {
          const dq = deliverQueue(channel, tier);
          polled.set(dq, config.NOTIFIER_IDLE_POLL[tier]);
          runners.set(
            dq,
            new QueueRunner<DeliveryJob>({
              ...common,
              queue: dq,
              prepare: (jobs) => deliverer.claim(jobs, tier),
              handle: (job, claimed) => deliverer.handle(dq, job, claimed as ClaimedBatch),
            }),
          );
        }
      }
      watch = new QueueWatch({ pool, queues: polled, wake, log });
      reconciler = new Reconciler({
        pool,
        boss: b,
        log,
        intervalMs: config.NOTIFIER_RECONCILE_INTERVAL,
        graceMs: config.NOTIFIER_RECONCILE_GRACE,
        wake,
      });
      await b.schedule(RETENTION_QUEUE, config.NOTIFIER_RETENTION_SCHEDULE, {}, { tz: 'UTC' });
      await b.work(RETENTION_QUEUE, { pollingIntervalSeconds: 30 }, async () => {
        const r = await runRetention(pool, new Date(clock.now() - config.NOTIFIER_RETENTION));
        log.info({ ...r }, 'retention: old records deleted');
      });
    }

    // 3. Serving: the routes receive the finished pool, queues and caller.
    http = await startHttpService({
      name: 'notifier',
      host: config.HOST,
      port: config.NOTIFIER_PORT,
      log,
      registry,
      maxBodyBytes: config.MAX_BODY_BYTES,
      checks: [postgresCheck(pool)],
      detail: off,
      routes: (app, edge) => {
        registerIngestRoutes(app, edge, {
          pool,
          boss: b,
          caller,
          metrics,
          idempotencyTtlMs: config.NOTIFIER_IDEMPOTENCY_TTL,
          markTemplateUsed: (id) => markTemplateUsed(pool, id),
          wake,
          policies: { catalog, settings },
        });
        registerPreferenceRoutes(app, edge, { pool, caller, catalog, leaseMs: lease });
        registerTrackingRoutes(app, edge, {
          pool,
          caller,
          pixel,
          inboxPageSize: config.NOTIFIER_INBOX_PAGE_SIZE,
          log,
          deferred: (tier) => !backpressure.mayRun(tier),
        });
        registerDlqRoutes(app, edge, { pool, boss: b, caller, adminRoles: config.NOTIFIER_ADMIN_ROLES, wake });
        registerAdminNotificationRoutes(app, edge, {
          pool,
          caller,
          adminRoles: config.NOTIFIER_ADMIN_ROLES,
          catalog,
          settings,
          deferred: (tier) => !backpressure.mayRun(tier),
        });
        registerCampaignRoutes(app, edge, {
          pool,
          boss: b,
          caller,
          adminRoles: config.NOTIFIER_ADMIN_ROLES,
          wake,
          stop: { heartbeatMs: config.NOTIFIER_REPLICA_HEARTBEAT, waitMs: config.NOTIFIER_CAMPAIGN_STOP_WAIT },
        });
        registerSegmentRoutes(app, edge, {
          pool,
          caller,
          adminRoles: config.NOTIFIER_ADMIN_ROLES,
          maxUploadBytes: config.NOTIFIER_SEGMENT_MAX_BYTES,
          staleMs: UPLOAD_STALE_MS,
          cleanup: segmentCleanup,
          onUploadBody: deps.onSegmentUploadBody,
        });
        registerWebhookRoutes(app, edge, {
          writer: feedback,
          certs,
          certPolicy,
          topicArns: config.NOTIFIER_SES_TOPIC_ARNS ?? [],
          snsMaxAgeMs: config.NOTIFIER_SNS_MAX_AGE,
          clock,
          publicUrl: config.NOTIFIER_PUBLIC_URL,
          smsAuthToken: config.SMS_AUTH_TOKEN,
          metrics,
          log,
        });
        registerSuppressionRoutes(app, edge, { pool, caller, adminRoles: config.NOTIFIER_ADMIN_ROLES, log });
        registerRampRoutes(app, edge, { pool, caller, adminRoles: config.NOTIFIER_ADMIN_ROLES, ramp: providers });
        registerTemplateRoutes(app, edge, pool, caller);
        registerProfileRoutes(app, edge, pool, caller);
        registerDeviceRoutes(app, edge, pool, caller);
        // This API's document (notifier/openapi.ts), without credentials (shared/openapi.ts).
        serveOpenApi(app, edge, notifierOpenApi);
      },
    });

    // 4. Running: the workers take jobs; old segment versions are cleaned up; provider events that
    // arrived before their send was recorded are matched again.
    segmentCleanup.start();
    feedback.startRematching(FEEDBACK_REMATCH_MS, FEEDBACK_REMATCH_WITHIN_MS);
    if (config.NOTIFIER_WORKERS) {
      // Registered and holding the stopped campaigns before any worker claims.
      await killSwitch?.start();
      backpressure.start();
      for (const r of runners.values()) r.start();
      watch?.start();
      reconciler?.start();
      pump?.start();
      shardRescue?.start();
    }
  } catch (err) {
    await watch?.stop();
    await shardRescue?.stop();
    await pump?.stop();
    await killSwitch?.close();
    await http?.close(0);
    await feedback.close().catch(() => {});
    await segmentCleanup.stop();
    await boss?.stop({ graceful: false, close: false }).catch(() => {});
    ramp?.close();
    await channels?.close?.().catch(() => {});
    await listener.close();
    caller.close();
    await pool.end().catch(() => {});
    throw err;
  }

  let closed: Promise<void> | undefined;
  return {
    port: http.port,
    pool,
    boss,
    reconciler,
    backpressure,
    preferences,
    segmentCleanup,
    urls: { api: `http://${config.HOST}:${http.port}` },
    close: () =>
      (closed ??= (async () => {
        await http.close(graceMs);
        await feedback.close();
        await segmentCleanup.stop();
        backpressure.stop();
        await reconciler?.stop();
        await shardRescue?.stop();
        await pump?.stop();
        await watch?.stop();
        await Promise.all([...runners.values()].map((r) => r.stop(graceMs)));
        await killSwitch?.close();
        await boss
          ?.stop({ graceful: true, wait: true, close: false, timeout: Math.max(1000, Math.min(graceMs, 5000)) })
          .catch((err: unknown) => {
            log.warn({ err }, 'pg-boss did not stop cleanly');
          });
        ramp?.close();
        await channels?.close?.().catch((err: unknown) => log.warn({ err }, 'closing the channels failed'));
        await listener.close();
        caller.close();
        await pool.end();
      })()),
  };
}
