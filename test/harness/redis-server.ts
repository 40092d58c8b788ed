/**
 * Spawning real redis-server processes for the test run: a standalone server, and a 3-master
 * Redis Cluster built from the same binary. No persistence (no RDB, no AOF), data in temp dirs,
 * 127.0.0.1 only. The cluster is formed from Node (CLUSTER ADDSLOTS / MEET over ioredis), so
 * redis-cli is not needed; setup waits until every node reports cluster_state:ok.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Redis } from 'ioredis';
import { freeClusterPort, freePort } from './ports.js';
import { waitFor } from './wait.js';

export const REDIS_SERVER_MISSING =
  'redis-server is not installed, and the tests need it (for REDIS_URL when unset, and for the 3-node Redis Cluster): ' +
  'install it (Debian/Ubuntu: apt-get install redis-server redis-tools; macOS: brew install redis), ' +
  'or set REDIS_URL and TEST_REDIS_CLUSTER_NODES to servers you run';

/** The redis-server on PATH, or undefined. */
export function findRedisServer(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, 'redis-server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export interface RedisProcess {
  readonly port: number;
  stop(): Promise<void>;
  /**
   * SIGKILL, at once. For a server under `CLIENT PAUSE … ALL`: it does not stop on SIGTERM while
   * paused, so stop() would wait its 5 s for nothing (the harness's servers keep no data).
   */
  kill(): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitNetInstalled = false;

/** A run that dies without teardown must not leave redis-servers behind. */
function installExitNet(): void {
  if (exitNetInstalled) return;
  exitNetInstalled = true;
  process.on('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}

/** Resolves true when a PING on 127.0.0.1:port answers PONG (also used by bench/lib/redis.ts). */
export function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: '127.0.0.1', port });
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

interface SpawnOptions {
  bin: string;
  /** Picks the port for each attempt (a lost race to another process picks again). */
  choosePort: () => Promise<number>;
  dir: string;
  extraArgs?: (port: number) => string[];
}

/** Starts one redis-server and waits until it answers PING. */
export async function spawnRedisServer(opts: SpawnOptions): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt++) {
    const port = await opts.choosePort();
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--protected-mode',
      'no',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
      '--dir',
      opts.dir,
      '--logfile',
      '',
      '--loglevel',
      'warning',
      ...(opts.extraArgs?.(port) ?? []),
    ];
    const child = spawn(opts.bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    installExitNet();
    live.add(child);
    let output = '';
    const collect = (d: Buffer): void => {
      output = (output + d.toString()).slice(-4000);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    let spawnError: Error | undefined;
    child.once('error', (err) => (spawnError = err));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.once('exit', () => live.delete(child));
    const isGone = (): boolean => spawnError !== undefined || child.exitCode !== null || child.signalCode !== null;
    try {
      await waitFor(
        async () => {
          if (isGone()) throw new Error('exited');
          return ping(port);
        },
        { timeoutMs: 10_000, intervalMs: 20, what: `redis-server on port ${port}` },
      );
    } catch {
      child.kill('SIGKILL');
      if (spawnError && (spawnError as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(REDIS_SERVER_MISSING);
      if (/Address already in use/i.test(output) && attempt < 3) continue;
      const last = output.trim().split('\n').filter(Boolean).pop() ?? spawnError?.message ?? 'no output';
      throw new Error(`redis-server did not start on port ${port}: ${last}`);
    }
    return {
      port,
      async stop() {
        if (isGone()) return;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      },
      async kill() {
        if (isGone()) return;
        child.kill('SIGKILL');
        await exited;
      },
    };
  }
}

export interface RedisServer {
  url: string;
  stop(): Promise<void>;
}

/** A standalone redis-server on a free port, with no persistence. */
export async function startRedisServer(bin: string): Promise<RedisServer> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-test-redis-'));
  try {
    const proc = await spawnRedisServer({ bin, dir, choosePort: freePort });
    return {
      url: `redis://127.0.0.1:${proc.port}`,
      async stop() {
        await proc.stop();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

export interface RedisClusterServer {
  /** host:port of every master. */
  nodes: string[];
  stop(): Promise<void>;
}

const SLOTS = 16384;

/** A Redis Cluster of `masters` nodes (no replicas), every slot assigned, cluster_state:ok. */
export async function startRedisCluster(bin: string, masters = 3): Promise<RedisClusterServer> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-test-redis-cluster-'));
  const procs: RedisProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(procs.map((p) => p.stop()));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const started = await Promise.all(
      Array.from({ length: masters }, () =>
        spawnRedisServer({
          bin,
          dir,
          choosePort: freeClusterPort,
          extraArgs: (port) => [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            `nodes-${port}.conf`,
            // Also the delay before a node that saw the cluster down reports ok again: kept short
            // so setup takes ~2 s (a node's own 2 s writable delay after start is the floor).
            '--cluster-node-timeout',
            '2000',
            // A test cluster with no replicas: a node that is down must not stop the others.
            '--cluster-require-full-coverage',
            'no',
          ],
        }),
      ),
    );
    procs.push(...started);
    await formCluster(procs.map((p) => p.port));
    return { nodes: procs.map((p) => `127.0.0.1:${p.port}`), stop };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}

/** Assigns slot ranges, introduces the nodes to each other, and waits for cluster_state:ok everywhere. */
async function formCluster(ports: number[]): Promise<void> {
  const clients = ports.map((port) => new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 }));
  try {
    await Promise.all(clients.map((c) => c.connect()));
    const per = Math.ceil(SLOTS / clients.length);
    await Promise.all(
      clients.map(async (c, i) => {
        // Distinct config epochs up front, as redis-cli does, so no epoch collision has to resolve.
        await c.call('CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1));
        const slots: string[] = [];
        for (let s = i * per; s < Math.min(SLOTS, (i + 1) * per); s++) slots.push(String(s));
        await c.call('CLUSTER', 'ADDSLOTS', ...slots);
      }),
    );
    for (const port of ports.slice(1)) await clients[0]?.call('CLUSTER', 'MEET', '127.0.0.1', String(port));
    await waitFor(
      async () => {
        const infos = await Promise.all(clients.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
        return infos.every(
          (info) =>
            info.includes('cluster_state:ok') &&
            info.includes(`cluster_known_nodes:${clients.length}`) &&
            info.includes(`cluster_slots_ok:${SLOTS}`),
        );
      },
      { timeoutMs: 20_000, intervalMs: 50, what: 'the Redis Cluster to reach cluster_state:ok' },
    );
  } finally {
    for (const c of clients) c.disconnect();
  }
}
