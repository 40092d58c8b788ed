/**
 * A redis-server of the bench's own on a free port (no persistence, 127.0.0.1 only), so the Redis
 * store is measured against a server nobody else is loading or flushing at the same time.
 */
import { join } from 'node:path';
import { ping } from '../../test/harness/redis-server.js';
import { freePort, spawnPinned, waitUntil, type Started } from './processes.js';

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
