/**
 * A redis-server of the bench's own on a free port (no persistence, 127.0.0.1 only), so the Redis
 * store is measured against a server nobody else is loading or flushing at the same time.
 */
import { connect } from 'node:net';
import { join } from 'node:path';
import { freePort, spawnPinned, waitUntil, type Started } from './processes.js';

/** True when a PING on 127.0.0.1:port answers PONG. */
export function ping(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    let buf = '';
    const done = (ok: boolean): void => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.once('error', () => done(false));
    sock.once('connect', () => sock.write('*1\r\n$4\r\nPING\r\n'));
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
  });
}

export async function startRedis(bin: string, dir: string, cpu: string | undefined): Promise<{ url: string; process: Started }> {
  const port = await freePort();
  const log = join(dir, 'redis.log');
  const p = spawnPinned(
    'redis-server',
    bin,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', dir],
    { cpu, logFile: log },
  );
  await waitUntil(p, 'PONG', () => ping(port), log);
  return { url: `redis://127.0.0.1:${port}`, process: p };
}
