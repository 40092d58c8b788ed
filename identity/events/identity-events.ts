/**
 * The event-sourced half of the identity service in one place: the event store, the user and order
 * command handlers, the read models, the projection runner with its LISTEN connection, and the
 * routes (orders API, projection operator endpoints). app.ts builds it inside the HTTP service's
 * route hook (where the pool first exists), then calls `start()` once the service listens.
 *
 * What other parts of identity use (the OAuth server, signup):
 * - `users.register({ email, name, userId? }, { client? })`, `users.findUserIdByEmail(email)`,
 *   `users.get(userId)`, `users.changeEmail(...)`, `users.recordRefreshTokenReuse(...)`;
 * - `readModels.userCard(userId)` for a profile; `store` for anything lower level.
 */
import type pg from 'pg';
import type { Registry } from 'prom-client';
import type { Clock } from '../../shared/clock.js';
import type { EdgeOptions, HealthCheck } from '../../shared/http.js';
import type { Verifier } from '../../shared/jwt/index.js';
import type { Logger } from '../../shared/log.js';
import type { TemplatedApp } from '../../shared/uws.js';
import type { CardTokenizer } from '../domain/card.js';
import { Orders } from '../domain/orders.js';
import { Users } from '../domain/users.js';
import { BearerAuth } from '../http/orders-auth.js';
import { registerOrderRoutes } from '../http/orders.js';
import type { IdentityDpop } from '../oauth/dpop.js';
import { registerProjectionAdminRoutes } from './admin-http.js';
import { EventStore } from './event-store.js';
import { createEventMetrics, type EventMetrics } from './metrics.js';
import { ProjectionRunner } from './projection-runner.js';
import { identityProjectors } from './projectors/index.js';
import { ReadModels } from './read-models.js';
import { AppendSignal, EventsListener } from './wakeup.js';

export interface IdentityEventsConfig {
  databaseUrl: string;
  snapshotEvery: number;
  runProjections: boolean;
  pollIntervalMs: number;
  batchSize: number;
  maxAttempts: number;
  warehouseWindowMs: number;
  selfDeleteMaxTotal: number;
}

export interface IdentityEventsDeps {
  pool: pg.Pool;
  registry: Registry;
  log: Logger;
  clock: Clock;
  verifier: Verifier;
  /** DPoP proofs for `Authorization: DPoP` on the orders API; without it only Bearer is accepted. */
  dpop?: IdentityDpop;
  tokenizeCard?: CardTokenizer;
}

export interface IdentityEvents {
  readonly store: EventStore;
  readonly users: Users;
  readonly orders: Orders;
  readonly readModels: ReadModels;
  readonly runner: ProjectionRunner;
  readonly metrics: EventMetrics;
  /** Readiness: the projections' views exist. */
  readonly check: HealthCheck;
  routes(app: TemplatedApp, edge: EdgeOptions): void;
  /** Creates the read models if needed, starts the projector loops and LISTEN. */
  start(): Promise<void>;
  close(): Promise<void>;
}

export function createIdentityEvents(config: IdentityEventsConfig, deps: IdentityEventsDeps): IdentityEvents {
  const { pool, log, clock } = deps;
  const signal = new AppendSignal(pool, log);
  let runner: ProjectionRunner | undefined = undefined;
  const metrics = createEventMetrics(deps.registry, () => runner!.lagSeconds());
  const store = new EventStore(pool, {
    onAppended: (result) => {
      for (const type of result.types) metrics.appended.inc({ type });
      signal.poke();
    },
  });
  const projectors = identityProjectors({ warehouseWindowMs: config.warehouseWindowMs });
  // Each projector's dead-letter count exists from the start, at 0 (a dashboard shows 0, not no data).
  for (const p of projectors) metrics.deadLettered.inc({ projector: p.name }, 0);
  runner = new ProjectionRunner({
    pool,
    store,
    projectors,
    clock,
    log,
    metrics,
    batchSize: config.batchSize,
    maxAttempts: config.maxAttempts,
    pollIntervalMs: config.pollIntervalMs,
  });
  const users = new Users({ store, clock, log, snapshotEvery: config.snapshotEvery });
  const orders = new Orders({
    store,
    clock,
    log,
    snapshotEvery: config.snapshotEvery,
    policy: { selfDeleteMaxTotal: config.selfDeleteMaxTotal },
  });
  const readModels = new ReadModels(pool);
  const auth = new BearerAuth(deps.verifier, deps.dpop);
  const listener = new EventsListener({ url: config.databaseUrl, log, onNotify: () => runner.wake() });
  const live = runner;
  let ready = false;

  return {
    store,
    users,
    orders,
    readModels,
    runner: live,
    metrics,
    check: {
      name: 'projections',
      check: async () => {
        if (!ready) throw new Error('projections are starting');
      },
    },
    routes(app, edge) {
      registerOrderRoutes(app, edge, {
        orders,
        readModels,
        auth,
        log,
        pool,
        clock,
        policy: { selfDeleteMaxTotal: config.selfDeleteMaxTotal },
        tokenizeCard: deps.tokenizeCard,
      });
      registerProjectionAdminRoutes(app, edge, { runner: live, auth, pool, store, projectors: live.projectors, clock, log, metrics });
    },
    async start() {
      if (config.runProjections) {
        await live.start();
        await listener.start();
      } else {
        await live.ensure();
      }
      ready = true;
    },
    async close() {
      signal.close();
      await listener.close();
      await live.close();
    },
  };
}
