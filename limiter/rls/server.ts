/**
 * The sidecar's gRPC port for Envoy (LIMITER_RLS_PORT): `envoy.service.ratelimit.v3.RateLimitService`
 * beside gRPC health and reflection. Composed by limiter/sidecar.ts when the port is set.
 *
 * A ShouldRateLimit call is read (descriptors.ts), each descriptor decided by the data plane's own
 * `decideFor` (the quota cache, the decoy for unknown keys, the stale-table cap, the gate with its
 * counter store, fail modes, emergency cap and shadow mode: nothing is decided here), and the
 * outcomes answered as Envoy expects (response.ts). Every descriptor of a call is decided and
 * charged, as envoyproxy/ratelimit does, even when an earlier one is over its limit.
 *
 * Malformed bytes, and descriptors over the configured limits, are INVALID_ARGUMENT: the request
 * decoder never throws into grpc-js (which would answer INTERNAL), and counts descriptors and
 * entries in the raw bytes before decoding them (descriptors.ts, `overCounts`).
 */
import * as grpc from '@grpc/grpc-js';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  RateLimitRequestSchema,
  RateLimitResponseSchema,
  RateLimitService,
  type RateLimitRequest,
  type RateLimitResponse,
} from '../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import { toGrpcError } from '../../shared/grpc.js';
import { addGrpcHealth, GrpcHealth } from '../../shared/grpc-health.js';
import { addGrpcReflection } from '../../shared/grpc-reflection.js';
import type { HealthCheck } from '../../shared/http.js';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import { Counter, type Registry } from '../../shared/metrics.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import type { DataPlane } from '../data-plane.js';
import type { Outcome } from '../gate.js';
import type { Route, RouteTable } from '../routes.js';
import { overCounts, readRequest, type DescriptorLimits, type DescriptorQuery } from './descriptors.js';
import { Code, rlsResponse } from './response.js';

export interface RlsServerOptions {
  plane: DataPlane;
  routes: RouteTable;
  clock: Clock;
  log: Logger;
  registry: Registry;
  limits: DescriptorLimits;
  host: string;
  port: number;
  /** The sidecar's readiness checks (as /readyz): what the health service reports for the RLS. */
  checks: readonly HealthCheck[];
  /** How often open health Watch streams re-run the checks, ms. */
  healthPollMs?: number;
}

export interface RlsServer {
  port: number;
  health: GrpcHealth;
  /** NOT_SERVING at once, then stops taking calls and waits for those in flight up to `graceMs`. */
  close(graceMs: number): Promise<void>;
}

/**
 * The route of a descriptor that has no `path` entry, or one no route matches (Envoy may front
 * services the sidecar has no route for): class `default` (fail mode open unless the quota says
 * otherwise), the shared per-IP cap, and `unrouted` as the metrics label.
 */
export const UNROUTED: Route = {
  prefix: 'unrouted',
  upstream: '',
  upstreamIndex: -1,
  auth: 'optional',
  class: 'default',
  owner: undefined,
  maxBody: undefined,
  ipLimit: undefined,
};

// Ownership (a user's own paths) is authorisation, which Envoy's rate limit filter cannot express:
// the RLS decides quotas only.
const NO_OWNERS: readonly string[] = [];

/** A request whose bytes could not be decoded: answered INVALID_ARGUMENT by the handler. */
class Malformed {
  constructor(
    readonly reason: string,
    readonly field = 'request',
  ) {}
}

export async function startRlsServer(o: RlsServerOptions): Promise<RlsServer> {
  const requests = new Counter({
    name: 'ratelimit_rls_requests',
    help: 'ShouldRateLimit calls on the RLS port by answer: ok, over_limit, invalid_argument, error',
    labelNames: ['code'],
    registers: [o.registry],
  });
  for (const c of ['ok', 'over_limit', 'invalid_argument', 'error']) requests.labels(c).inc(0);

  const decide = (q: DescriptorQuery): Outcome | Promise<Outcome> | undefined => {
    if (q.caller === undefined) return undefined;
    const route = q.path === undefined ? UNROUTED : (o.routes.match(q.path) ?? UNROUTED);
    const d = o.plane.decideFor(q.caller, route, q.method, q.path ?? '', NO_OWNERS, q.hits);
    // Only an ownership rule refuses with an error, and none is passed.
    if (d instanceof PlatformError) throw d;
    return d;
  };

  const shouldRateLimit = (
    call: grpc.ServerUnaryCall<RateLimitRequest | Malformed, RateLimitResponse>,
    cb: grpc.sendUnaryData<RateLimitResponse>,
  ): void => {
    const req = call.request;
    let pending: Array<Outcome | Promise<Outcome> | undefined>;
    try {
      if (req instanceof Malformed) throw invalidField(req.field, req.reason);
      pending = readRequest(req, o.limits).map(decide);
    } catch (err) {
      requests.labels(err instanceof PlatformError && err.code === 'invalid_field' ? 'invalid_argument' : 'error').inc();
      if (!(err instanceof PlatformError)) o.log.error({ err }, 'rate limit request failed unexpectedly');
      cb(toGrpcError(err));
      return;
    }
    const answer = (outcomes: Array<Outcome | undefined>): void => {
      const res = rlsResponse(outcomes, o.clock.now());
      requests.labels(res.overallCode === Code.OVER_LIMIT ? 'over_limit' : 'ok').inc();
      cb(null, res);
    };
    // With in-process counters every outcome is already there: no promise, no tick.
    if (!pending.some((p) => p instanceof Promise)) {
      answer(pending as Array<Outcome | undefined>);
      return;
    }
    Promise.all(pending.map((p) => Promise.resolve(p))).then(answer, (err: unknown) => {
      // The gate answers store failures with the fail mode itself; anything here is a bug.
      requests.labels('error').inc();
      o.log.error({ err }, 'rate limit decision failed unexpectedly');
      cb(toGrpcError(err));
    });
  };

  const server = new grpc.Server({
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    // README "Who may call it": bounds what one connection can hold open.
    'grpc.max_concurrent_streams': 1000,
  });
  server.addService(rlsDefinition(o.limits), { shouldRateLimit });
  const health = new GrpcHealth({ services: { [RateLimitService.typeName]: o.checks }, pollMs: o.healthPollMs });
  addGrpcHealth(server, health);
  addGrpcReflection(server, [RateLimitService]);

  const host = o.host.includes(':') ? `[${o.host}]` : o.host;
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${o.port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(Object.assign(new Error(`port ${o.port} is in use or not available`), { cause: err, code: 'EADDRINUSE' })) : resolve(p),
    ),
  );
  o.log.info({ port, host: o.host }, 'rate limit service (Envoy RLS) listening');

  let closing: Promise<void> | undefined;
  return {
    port,
    health,
    close: (graceMs) =>
      (closing ??= new Promise<void>((resolve) => {
        health.shutdown();
        health.close();
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      })),
  };
}

const toBuffer = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/**
 * RateLimitService's grpc-js definition, with a request decoder that never throws: bytes that are
 * not a RateLimitRequest become a {@link Malformed} for the handler to refuse as INVALID_ARGUMENT.
 */
function rlsDefinition(limits: DescriptorLimits): grpc.ServiceDefinition {
  const method = RateLimitService.method.shouldRateLimit;
  return {
    shouldRateLimit: {
      path: `/${RateLimitService.typeName}/${method.name}`,
      originalName: method.name,
      requestStream: false,
      responseStream: false,
      requestSerialize: (m: RateLimitRequest) => toBuffer(toBinary(RateLimitRequestSchema, m)),
      requestDeserialize: (b: Buffer): RateLimitRequest | Malformed => {
        // Counted before decoding, so a message of millions of empty descriptors allocates nothing.
        const over = overCounts(b, limits);
        if (over !== undefined) return new Malformed(over.reason, over.field);
        try {
          // Unknown fields are dropped, not kept: nothing here reads them.
          return fromBinary(RateLimitRequestSchema, b, { readUnknownFields: false });
        } catch (err) {
          return new Malformed(`the request is not a RateLimitRequest: ${err instanceof Error ? err.message : String(err)}`);
        }
      },
      responseSerialize: (m: RateLimitResponse) => toBuffer(toBinary(RateLimitResponseSchema, m)),
      responseDeserialize: (b: Buffer) => fromBinary(RateLimitResponseSchema, b),
    } as grpc.MethodDefinition<RateLimitRequest | Malformed, RateLimitResponse>,
  };
}
