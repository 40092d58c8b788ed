/**
 * The one place that imports uWebSockets.js.
 *
 * The official uWS.js release is published only on GitHub, which our machines cannot reach, so we
 * install a build from the npm registry under the alias `uWebSockets.js`. Which one is decided by
 * measurement: limiter/README.md "Which uWS build" holds the conformance table, and
 * test/limiter/uws-conformance.test.ts checks the installed build against it. The builds that load
 * here name a few functions differently (@rjweb/uws: `closeSocket`, `getSocketPort`,
 * `req.forEachHeader`; the official API: `us_listen_socket_close`, `us_socket_local_port`,
 * `req.forEach`), so everything else imports from here and a change of build is a package.json
 * change that this file absorbs.
 */
import { createRequire } from 'node:module';
import type * as UwsTypes from 'uWebSockets.js';

const require = createRequire(import.meta.url);
// The CommonJS entry has every function under its real name; an ESM wrapper may not.
const uws = require('uWebSockets.js') as typeof UwsTypes & Record<string, unknown>;

export type HttpRequest = UwsTypes.HttpRequest;
export type HttpResponse = UwsTypes.HttpResponse;
export type TemplatedApp = UwsTypes.TemplatedApp;
export type ListenSocket = UwsTypes.us_listen_socket;

export const App: typeof UwsTypes.App = uws.App;

type CloseFn = (socket: ListenSocket) => void;
type PortFn = (socket: ListenSocket) => number;

/** Closes a listen socket (official name `us_listen_socket_close`). */
export const closeListenSocket: CloseFn = uws['us_listen_socket_close'] ?? (uws['closeSocket'] as CloseFn);

/** The local port a listen socket is bound to (official name `us_socket_local_port`). */
export const listenSocketPort: PortFn = uws['us_socket_local_port'] ?? (uws['getSocketPort'] as PortFn);

/**
 * Closes an app: its listen sockets and every open connection at once, nothing drained (uWS
 * `App.close()`, in the pinned build though not in its type declarations). A worker thread must do
 * this before it exits: a thread that ends with an open uWS app aborts the whole process
 * (`uv_loop_close() while having open handles`, exit 134; measured, limiter/README.md).
 */
export function closeApp(app: TemplatedApp): void {
  (app as TemplatedApp & { close(): void }).close();
}

/**
 * Whether the loaded module is a native uWS build. @trufflesuite/uws-js-unofficial falls back, with
 * only a console.warn, to a pure-Node imitation when no binary matches the Node ABI; that fallback
 * has none of the parser behaviour the edge is tested for, so the conformance test refuses it.
 */
export const nativeBuild: boolean = typeof closeListenSocket === 'function' && typeof uws['getParts'] === 'function';

/**
 * Throws unless a native build loaded. The sidecar calls it before it listens: on the fallback it
 * would serve, slowly and with another HTTP parser than the one every edge test pins, and the only
 * sign would be a console.warn at import.
 */
export function requireNativeBuild(): void {
  if (!nativeBuild)
    throw new Error(
      'uWebSockets.js: no native build loaded for this Node ABI (the pure-Node fallback did; UWS_USE_FALLBACK set?): the sidecar runs only on a native build (limiter/README.md "Which uWS build")',
    );
}

type HeaderVisitor = (key: string, value: string) => void;
type ForEach = (this: HttpRequest, cb: HeaderVisitor) => void;

/**
 * Calls `cb` with each request header (lower-case name, value as the build gives it). The official
 * API calls it `forEach`; @rjweb/uws renames it `forEachHeader`. Resolved once per request object
 * shape, not per call.
 */
export function forEachHeader(req: HttpRequest, cb: HeaderVisitor): void {
  const r = req as unknown as { forEach?: ForEach; forEachHeader?: ForEach };
  (r.forEach ?? r.forEachHeader)!.call(req, cb);
}

/**
 * Listens on host:port; resolves with the socket and the bound port, rejects if the port is taken.
 *
 * Every build here listens with SO_REUSEPORT on an explicit port: a second process (or thread)
 * listening on the same port gets a socket too and the kernel splits the connections between
 * them. Not on port 0: uSockets sets SO_REUSEPORT only when the port asked for is not 0, so a
 * socket on an ephemeral port is exclusive (measured with the installed build, two threads and
 * two processes: test/limiter/shared-counters-http.test.ts picks a free port first). So a failure
 * is not "another process of ours holds it" but a port held by a socket without SO_REUSEPORT
 * (one opened on port 0 included), another user's, or an address that cannot be bound; uWS
 * gives no reason.
 */
export function listen(app: TemplatedApp, host: string, port: number): Promise<{ socket: ListenSocket; port: number }> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, (socket) => {
      if (socket === false)
        reject(
          Object.assign(new Error(`cannot listen on ${host}:${port} (port in use without SO_REUSEPORT, or the address cannot be bound)`), {
            code: 'EADDRINUSE',
            address: host,
            port,
          }),
        );
      else resolve({ socket, port: listenSocketPort(socket) });
    });
  });
}
