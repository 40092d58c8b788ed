/**
 * Starting and stopping an HTTP service the same way everywhere: a uWS app with the service's
 * routes plus /healthz, /readyz and /metrics, listening on host:port, and a `close()` that stops
 * accepting, waits for requests in flight (up to a deadline), then closes every connection left.
 */
import type { Registry } from 'prom-client';
import { App, closeApp, closeListenSocket, listen, type TemplatedApp } from './uws.js';
import { InFlight, operationalRoutes, registeredRoutes, type EdgeOptions, type HealthCheck, type RegisteredRoute } from './http.js';
import type { Logger } from './log.js';

export interface HttpServiceOptions {
  name: string;
  host: string;
  port: number;
  log: Logger;
  registry: Registry;
  maxBodyBytes: number;
  checks: HealthCheck[];
  /**
   * Parts of the service turned off by configuration, by name, each with a sentence: shown in
   * /readyz's `detail` without making it fail (the rest of the service works).
   */
  detail?: Record<string, string>;
  /** Registers the service's own routes. */
  routes?: (app: TemplatedApp, edge: EdgeOptions) => void;
  /** When true, /readyz answers 503 (set while draining). */
  draining?: () => boolean;
}

export interface HttpService {
  readonly port: number;
  readonly app: TemplatedApp;
  /**
   * Stops listening, waits up to `graceMs` for requests in flight, then closes every connection
   * left: idle keep-alive ones, and any request that outlived the grace.
   */
  close(graceMs?: number): Promise<void>;
}

/** The apps listening in this process, by port, while they listen. */
const listening = new Map<number, TemplatedApp>();

/**
 * The routes of the HTTP service of this process listening on `port` (undefined when none is):
 * what the OpenAPI tests (test/openapi/) compare each service's document with, without every
 * composition root having to hand its app out.
 */
export function routesServedOn(port: number): RegisteredRoute[] | undefined {
  const app = listening.get(port);
  return app === undefined ? undefined : registeredRoutes(app);
}

export async function startHttpService(opts: HttpServiceOptions): Promise<HttpService> {
  const app = App();
  const inFlight = new InFlight();
  const edge: EdgeOptions = { log: opts.log, maxBodyBytes: opts.maxBodyBytes, inFlight };
  let closing = false;
  opts.routes?.(app, edge);
  operationalRoutes(app, {
    ...edge,
    registry: opts.registry,
    checks: opts.checks,
    ...(opts.detail !== undefined && { detail: opts.detail }),
    draining: () => closing || !!opts.draining?.(),
  });
  const { socket, port } = await listen(app, opts.host, opts.port);
  opts.log.info({ port, host: opts.host }, `${opts.name} listening`);
  listening.set(port, app);
  return {
    port,
    app,
    async close(graceMs = 10_000) {
      if (closing) return;
      closing = true;
      if (listening.get(port) === app) listening.delete(port);
      closeListenSocket(socket);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([inFlight.idle(), new Promise<void>((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
      // Closing the listen socket leaves the open connections open: a keep-alive client could
      // still send a request after close() resolved (to a service whose pool is then closed), and
      // each idle connection keeps the event loop alive until the client's keep-alive timeout (4 s
      // for fetch, 5 s for node:http) or uWS's idle timeout (10 s) ends it. A process that embeds
      // the service (every in-process test) waited that long after its close.
      closeApp(app);
    },
  };
}
