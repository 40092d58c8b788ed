/**
 * The environment variables read only by `npm start`, the CLIs, the container health check and `npm test` (bin/): default, meaning, parser. The README's
 * configuration table is generated from these declarations and shared/env.ts (bin/env-catalogue.ts)
 * and checked both ways by test/shared/config.test.ts. Add a variable here, then to the README.
 */
import { duration, list, nonEmpty, oneOf, port, v, type VarSpec } from '../shared/config.js';

export const TOOLS_ENV = {
  // ── every process ─────────────────────────────────────────────────────────
  DATA_DIR: v({
    default: '.data',
    services: ['start', 'cli'],
    description:
      'Where `npm start` keeps its state (relative paths: from the project root): secrets.env (the secrets it generated, read by the CLIs) and the embedded PostgreSQL',
    parse: nonEmpty,
  }),
  EMBEDDED_PG_DIR: v({
    default: undefined,
    optional: true,
    services: ['start', 'cli'],
    description:
      'Data directory of the embedded PostgreSQL started when DATABASE_URL is unset; unset, DATA_DIR/postgres (`npm run admin` finds the running server there)',
    parse: nonEmpty,
  }),
  EMBEDDED_PG_PORT: v({
    default: '0',
    services: ['start'],
    description: 'Port of the embedded PostgreSQL; 0 picks a free one (5432 is often a system PostgreSQL)',
    parse: port,
  }),
  // ── supervisor (npm start) ────────────────────────────────────────────────
  START_SERVICES: v({
    default: 'control-plane,limiter,notifier,identity,sandbox,console',
    services: ['start'],
    description: 'Which services `npm start` runs',
    parse: list(oneOf(['control-plane', 'limiter', 'notifier', 'identity', 'sandbox', 'console'])),
  }),
  START_READY_TIMEOUT: v({
    default: '60s',
    services: ['start'],
    description: 'How long `npm start` waits for every service to be ready before it gives up',
    parse: duration,
  }),
  // ── control plane ─────────────────────────────────────────────────────────
  CONTROL_PLANE_GRPC_URL: v({
    default: '127.0.0.1:50051',
    services: ['cli'],
    description: 'host:port of the control-plane gRPC server, for the admin CLI (`npm run quota`)',
    parse: nonEmpty,
  }),
  HEALTHCHECK_HOST: v({
    default: '127.0.0.1',
    services: ['healthcheck'],
    description: 'Address the Docker HEALTHCHECK script (bin/healthcheck.ts) probes /healthz on',
    parse: nonEmpty,
  }),
  // ── test harness (npm test) ───────────────────────────────────────────────
  TEST_REDIS_CLUSTER_NODES: v({
    default: undefined,
    optional: true,
    services: ['test'],
    description: 'Comma-separated host:port of a 3-master Redis Cluster for the tests; unset, `npm test` starts one from redis-server',
    parse: list(nonEmpty),
  }),
  TEST_DATABASE_TEMPLATE: v({
    default: undefined,
    optional: true,
    services: ['test'],
    description:
      "A database on DATABASE_URL's server with every service's migrations applied, which each test file's database is copied from; unset, `npm test` builds one for the run and drops it at the end",
    parse: nonEmpty,
  }),
} satisfies Record<string, VarSpec<unknown>>;
