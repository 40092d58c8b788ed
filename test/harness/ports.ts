/**
 * Free TCP ports on 127.0.0.1 for servers the tests start. A port is free when this returns; a
 * server that loses the race to another process should pick again (the spawners here retry).
 */
import { createServer } from 'node:net';

/** Binds `port` (0 = any) on 127.0.0.1 and returns the port it got, or undefined if taken. */
function tryBind(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(undefined));
    srv.listen(port, '127.0.0.1', () => {
      const addr = srv.address();
      const got = typeof addr === 'object' && addr ? addr.port : undefined;
      srv.close(() => resolve(got));
    });
  });
}

/** A port the OS reports free on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const port = await tryBind(0);
  if (port === undefined) throw new Error('no free port on 127.0.0.1');
  return port;
}

/**
 * A port P such that P and P + `gap` are both free, below the usual ephemeral range (32768+), so
 * the OS is unlikely to hand either to an outgoing connection between this check and the listen.
 */
async function freePortsApart(gap: number, what: string): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 10_000 + Math.floor(Math.random() * (22_768 - gap));
    if ((await tryBind(port)) !== undefined && (await tryBind(port + gap)) !== undefined) return port;
  }
  throw new Error(`no free port pair (P, P+${gap}) for ${what}`);
}

/** A port P such that P and P + 10000 are both free: a Redis Cluster node listens on P and on its cluster bus at P + 10000. */
export function freeClusterPort(): Promise<number> {
  return freePortsApart(10_000, 'a Redis Cluster node');
}

/**
 * A port P such that P and P + 1 are both free, for a service that listens on two neighbouring
 * ports by default (the sandbox: HTTP on SANDBOX_PORT, SMTP on SANDBOX_PORT + 1): a P + 1 in the
 * ephemeral range was taken by another test's outgoing connection between the check and the listen.
 */
export function freePortPair(): Promise<number> {
  return freePortsApart(1, 'a service on two neighbouring ports');
}
