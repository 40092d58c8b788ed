/**
 * The one place that imports uWebSockets.js.
 *
 * We install uWS.js as the npm alias `uWebSockets.js` → `@rjweb/uws@1.5.0` (the official release is
 * published only on GitHub, which our machines cannot reach). That build names two µSockets
 * functions differently (`closeSocket`, `getSocketPort`) and its ESM wrapper exports the official
 * names as undefined. Everything else imports from here, so moving to the official release is a
 * package.json change plus this file.
 */
import { createRequire } from 'node:module';
import type * as UwsTypes from 'uWebSockets.js';

const require = createRequire(import.meta.url);
// The CommonJS entry has every function under its real name; the ESM wrapper does not.
const uws = require('uWebSockets.js') as typeof UwsTypes & Record<string, unknown>;

export type HttpRequest = UwsTypes.HttpRequest;
export type HttpResponse = UwsTypes.HttpResponse;
export type TemplatedApp = UwsTypes.TemplatedApp;
export type ListenSocket = UwsTypes.us_listen_socket;

export const App: typeof UwsTypes.App = uws.App;

type CloseFn = (socket: ListenSocket) => void;
type PortFn = (socket: ListenSocket) => number;

/** Closes a listen socket (official name `us_listen_socket_close`). */
export const closeListenSocket: CloseFn = (uws['us_listen_socket_close'] as CloseFn | undefined) ?? uws['closeSocket'];

/** The local port a listen socket is bound to (official name `us_socket_local_port`). */
export const listenSocketPort: PortFn = (uws['us_socket_local_port'] as PortFn | undefined) ?? uws['getSocketPort'];

/** Listens on host:port; resolves with the socket and the bound port, rejects if the port is taken. */
export function listen(app: TemplatedApp, host: string, port: number): Promise<{ socket: ListenSocket; port: number }> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, (socket) => {
      // uWS binds exclusively and gives no reason; in practice it is a port in use.
      if (socket === false)
        reject(
          Object.assign(new Error(`port ${port} is in use (cannot listen on ${host}:${port})`), {
            code: 'EADDRINUSE',
            address: host,
            port,
          }),
        );
      else resolve({ socket, port: listenSocketPort(socket) });
    });
  });
}
