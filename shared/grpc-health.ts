/**
 * gRPC health checking (`grpc.health.v1.Health`, grpc/grpc doc/health-checking.md) for our gRPC
 * servers: what Kubernetes' `grpc:` probe, grpc_health_probe and Envoy's gRPC health checks call.
 *
 * Each served gRPC service name maps to readiness checks (the same `HealthCheck`s `/readyz` runs:
 * the control plane's PostgreSQL, the sidecar's quota snapshot); `""` is the whole server, SERVING
 * only when every check of every service passes. A status is computed when asked, never cached:
 *
 * - `Check(service)`: SERVING or NOT_SERVING now; a name not registered is NOT_FOUND.
 * - `Watch(service)`: the status at once, then a message on each change, found by re-running the
 *   checks every `pollMs` while any Watch is open (a check has no change event of its own; polling
 *   is the truth, as everywhere here). An unknown name is SERVICE_UNKNOWN and the stream stays open.
 * - `List`: every registered name with its status.
 * - `shutdown()` (draining): every name NOT_SERVING at once, on every open Watch too, so a balancer
 *   stops sending before the server stops taking calls; `close()` then ends the Watch streams.
 *
 * A check that takes longer than `checkTimeoutMs` (2 s, as /readyz) fails.
 *
 * @example
 *   const health = new GrpcHealth({ services: { 'quota.v1.QuotaSyncService': [postgresCheck(pool)] } });
 *   addGrpcHealth(server, health);
 *   // on SIGTERM: health.shutdown(); then stop the server.
 */
import type * as grpc from '@grpc/grpc-js';
import { status as grpcStatus } from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthCheckResponseSchema,
  HealthListResponseSchema,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from '../proto/gen/grpc/health/v1/health_pb.js';
import { addGrpcService } from './grpc.js';
import type { HealthCheck } from './http.js';

export { ServingStatus };

/** Service name of the whole server (grpc health-checking protocol). */
export const WHOLE_SERVER = '';

export interface GrpcHealthOptions {
  /** Readiness checks per fully qualified gRPC service name (`quota.v1.QuotaSyncService`). `""` is added as all of them. */
  services: Record<string, readonly HealthCheck[]>;
  /** How often open Watch streams re-run the checks, ms. */
  pollMs?: number;
  /** A check slower than this fails, ms. */
  checkTimeoutMs?: number;
}

interface Watcher {
  service: string;
  last: ServingStatus | undefined;
  send(status: ServingStatus): void;
  end(): void;
}

export class GrpcHealth {
  private readonly services = new Map<string, readonly HealthCheck[]>();
  private readonly watchers = new Set<Watcher>();
  private readonly pollMs: number;
  private readonly checkTimeoutMs: number;
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private draining = false;

  constructor(o: GrpcHealthOptions) {
    this.pollMs = o.pollMs ?? 1000;
    this.checkTimeoutMs = o.checkTimeoutMs ?? 2000;
    const all: HealthCheck[] = [];
    for (const [name, checks] of Object.entries(o.services)) {
      if (name === WHOLE_SERVER) continue;
      this.services.set(name, checks);
      for (const c of checks) if (!all.includes(c)) all.push(c);
    }
    this.services.set(WHOLE_SERVER, [...all, ...(o.services[WHOLE_SERVER] ?? [])]);
  }

  /** The registered service names, `""` first. */
  get names(): string[] {
    return [...this.services.keys()].sort();
  }

  /** The status of `service` now; undefined when the name is not registered. */
  async status(service: string): Promise<ServingStatus | undefined> {
    const checks = this.services.get(service);
    if (checks === undefined) return undefined;
    if (this.draining) return ServingStatus.NOT_SERVING;
    const results = await Promise.all(checks.map((c) => this.passes(c)));
    // Draining may have begun while the checks ran.
    return this.draining || results.includes(false) ? ServingStatus.NOT_SERVING : ServingStatus.SERVING;
  }

  /** Every name NOT_SERVING from now on, pushed to every open Watch (call when draining). */
  shutdown(): void {
    this.draining = true;
    for (const w of this.watchers) this.push(w, ServingStatus.NOT_SERVING);
  }

  /** Re-runs the checks of every open Watch now (a caller that knows readiness changed need not wait for the poll). */
  async refresh(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const byService = new Map<string, Promise<ServingStatus | undefined>>();
      for (const w of this.watchers) if (!byService.has(w.service)) byService.set(w.service, this.status(w.service));
      for (const w of this.watchers) {
        const s = await byService.get(w.service);
        this.push(w, s ?? ServingStatus.SERVICE_UNKNOWN);
      }
    } finally {
      this.polling = false;
    }
  }

  /** Ends the poll timer and every open Watch stream (so a server's graceful shutdown need not wait for them). */
  close(): void {
    this.stopPolling();
    for (const w of [...this.watchers]) w.end();
    this.watchers.clear();
  }

  private stopPolling(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The grpc-js implementation of `grpc.health.v1.Health`. */
  implementation() {
    const response = (status: ServingStatus): HealthCheckResponse => create(HealthCheckResponseSchema, { status });
    return {
      check: (call: grpc.ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, cb: grpc.sendUnaryData<HealthCheckResponse>) => {
        this.status(call.request.service).then(
          (s) => {
            if (s === undefined) cb({ code: grpcStatus.NOT_FOUND, details: `unknown service ${JSON.stringify(call.request.service)}` });
            else cb(null, response(s));
          },
          (err: unknown) => cb({ code: grpcStatus.INTERNAL, details: err instanceof Error ? err.message : 'health check failed' }),
        );
      },
      list: (_call: unknown, cb: grpc.sendUnaryData<ReturnType<typeof create<typeof HealthListResponseSchema>>>) => {
        void Promise.all(this.names.map(async (n) => [n, response((await this.status(n))!)] as const)).then((pairs) =>
          cb(null, create(HealthListResponseSchema, { statuses: Object.fromEntries(pairs) })),
        );
      },
      watch: (call: grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        const w: Watcher = {
          service: call.request.service,
          last: undefined,
          send: (s) => {
            if (!call.cancelled && !call.writableEnded) call.write(response(s));
          },
          end: () => {
            if (!call.cancelled && !call.writableEnded) call.end();
          },
        };
        this.watchers.add(w);
        const stop = (): void => {
          this.watchers.delete(w);
          if (this.watchers.size === 0) this.stopPolling();
        };
        call.on('cancelled', stop);
        call.on('close', stop);
        call.on('error', stop);
        if (this.timer === undefined) {
          this.timer = setInterval(() => void this.refresh(), this.pollMs);
          this.timer.unref();
        }
        void this.status(w.service).then((s) => this.push(w, s ?? ServingStatus.SERVICE_UNKNOWN));
      },
    };
  }

  private push(w: Watcher, s: ServingStatus): void {
    if (!this.watchers.has(w)) return;
    // After shutdown() nothing but NOT_SERVING goes out, whatever a poll still in flight found.
    const status = this.draining ? ServingStatus.NOT_SERVING : s;
    if (w.last === status) return;
    w.last = status;
    w.send(status);
  }

  private async passes(c: HealthCheck): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        c.check(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('timeout')), this.checkTimeoutMs);
        }),
      ]);
      return true;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Registers `grpc.health.v1.Health` backed by `health` on a grpc-js server. */
export function addGrpcHealth(server: grpc.Server, health: GrpcHealth): void {
  addGrpcService(server, Health, health.implementation());
}
