/**
 * The counter store's own RESP2 connection (limiter/admission/resp-connection.ts):
 * - raw bytes on a socket: replies split across writes, a malformed reply drops the connection and
 *   rejects every call in flight, then it reconnects;
 * - the real Redis at REDIS_URL: the admission script's replies equal ioredis's, request by request
 *   (random sequences, the script with a test clock, as script-equivalence.test.ts), and the store's
 *   decisions go through it; ACL user and database from the URL, a wrong password refused clearly;
 * - a Redis of our own: NOSCRIPT after SCRIPT FLUSH (calls in flight re-sent once, run once), a
 *   deadline that keeps the order aligned (late replies read and dropped), a killed connection with
 *   calls in flight (rejected, never re-sent: counted with a key) and the reconnect after it.
 */
import t from 'tap';
import fc from 'fast-check';
import { createServer, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { Redis } from 'ioredis';
import { admitScript } from '../../../limiter/admission/admit-script.js';
import { RespCallError, RespConnection, respScript } from '../../../limiter/admission/resp-connection.js';
import { RespError, RespProtocolError } from '../../../limiter/admission/resp-codec.js';
import { ALGORITHM_CODE, ALGORITHMS, CounterStoreError, RedisCounterStore, type LimitParams } from '../../../limiter/admission/index.js';
import { useRedis } from '../../harness/redis.js';
import { findRedisServer, startRedisServer } from '../../harness/redis-server.js';
import { waitFor } from '../../harness/wait.js';
import { freePort } from '../../harness/ports.js';
import type { TestContext } from '../../harness/db.js';
import { costArb, gapArb, limitArb, START_MS } from './models.js';

const open = (t: TestContext, url: string, deadlineMs = 2000, extra: Partial<ConstructorParameters<typeof RespConnection>[0]> = {}) => {
  const c = new RespConnection({ url, deadlineMs, connectTimeoutMs: 2000, ...extra });
  t.teardown(() => c.close());
  return c;
};
const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

t.test('raw bytes on a socket', async (t) => {
  const conns: Socket[] = [];
  let received = '';
  // Answers PING with +PONG; then the test drives what the server says.
  const server = createServer((s) => {
    conns.push(s);
    s.setNoDelay(true);
    s.on('data', (d) => {
      received += d.toString('latin1');
      if (received.endsWith('*1\r\n$4\r\nPING\r\n')) {
        received = '';
        // The handshake's reply, one byte per write.
        for (const x of Buffer.from('+PONG\r\n')) s.write(Buffer.from([x]));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as { port: number }).port;
  const c = open(t, `redis://127.0.0.1:${port}`);
  await c.ready(2000);
  t.teardown(() => conns.forEach((s) => s.destroy()));

  const a = c.call(['GET', 'a']);
  const b = c.call(['GET', 'b']);
  await waitFor(() => received.length >= 2 * '*2\r\n$3\r\nGET\r\n$1\r\na\r\n'.length, { what: 'two commands on the wire' });
  t.equal(received, '*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n', 'both commands in one write, in order');
  received = '';
  const replies = Buffer.from('*2\r\n:1\r\n$2\r\nok\r\n$-1\r\n');
  for (const x of replies) conns[0]!.write(Buffer.from([x]));
  t.same(await a, [1, 'ok'], 'a reply arriving one byte per write');
  t.equal(await b, null);

  // A malformed reply: the first call is answered, the others rejected, the connection dropped.
  const first = c.call(['GET', 'x']);
  const rest = [failure(c.call(['GET', 'y'])), failure(c.call(['GET', 'z']))];
  await waitFor(() => received.split('GET').length - 1 === 3, { what: 'three commands on the wire' });
  conns[0]!.write(':7\r\n!bad\r\n');
  const x = await first;
  const [y, z] = await Promise.all(rest);
  t.equal(x, 7, 'the reply before the bad bytes is delivered');
  for (const e of [y, z]) {
    t.type(e, RespCallError);
    t.equal((e as RespCallError).kind, 'unavailable');
    t.type((e as Error).cause, RespProtocolError);
  }
  await waitFor(() => conns.length === 2 && c.status === 'ready', { what: 'a new connection' });
  t.ok(conns[0]!.destroyed || conns[0]!.readableEnded, 'the old connection was dropped');
  const late = c.call(['GET', 'w']);
  await waitFor(() => received.includes('GET'), { what: 'the command on the new connection' });
  conns[1]!.write(':9\r\n');
  t.equal(await late, 9, 'answering again on the new connection');
});

// The same test clock as script-equivalence.test.ts: time from the last argument, no expiry.
const TEST_CLOCK = `local now = tonumber(ARGV[#ARGV])
local function save(key, alg, a, b, c, reset, now)
  redis.call('SET', key, string.format('%d:%.17g:%.17g:%.17g', alg, a, b, c))
end`;

t.test('the real Redis at REDIS_URL', async (t) => {
  const { redis, prefix, url } = await useRedis(t, 'admission-resp-connection');
  const c = open(t, url);
  await c.ready(2000);

  t.test('the admission script: the same replies as through ioredis, request by request', async (t) => {
    const src = admitScript(TEST_CLOCK);
    const script = respScript(src);
    redis.defineCommand('rlAdmitAtResp', { lua: src });
    const io = redis as Redis & { rlAdmitAtResp(...args: (string | number)[]): Promise<unknown> };
    const algs = ALGORITHMS as LimitParams['algorithm'][];
    let run = 0;
    let compared = 0;
    let denials = 0;
    await fc.assert(
      fc.asyncProperty(
        fc
          .record({ limit: limitArb(algs), global: fc.option(limitArb(algs), { nil: undefined }), shards: fc.integer({ min: 1, max: 4 }) })
          .chain((s) =>
            fc.tuple(
              fc.constant(s),
              fc.array(fc.record({ dt: gapArb(s.limit.intervalMs), cost: costArb(6) }), { minLength: 5, maxLength: 40 }),
            ),
          ),
        async ([s, reqs]) => {
          run++;
          let now = START_MS;
          for (const r of reqs) {
            now += r.dt;
            const L = s.limit;
            const G = s.global;
            const head = [ALGORITHM_CODE[L.algorithm], L.rate, L.burst, L.intervalMs, r.cost];
            const args = G ? [...head, ALGORITHM_CODE[G.algorithm], G.rate, G.burst, G.intervalMs, r.cost * s.shards, now] : [...head, now];
            const keys = (side: string) => (G ? [`${prefix}${side}:${run}:k`, `${prefix}${side}:${run}:g`] : [`${prefix}${side}:${run}:k`]);
            const ki = keys('io');
            const viaIo = await io.rlAdmitAtResp(ki.length, ...ki, ...args);
            const viaResp = await c.evalsha(script, keys('resp'), args);
            if (JSON.stringify(viaIo) !== JSON.stringify(viaResp))
              throw new Error(`ioredis ${JSON.stringify(viaIo)}, ours ${JSON.stringify(viaResp)}`);
            compared++;
            if ((viaResp as number[])[0] === 0) denials++;
          }
        },
      ),
      { numRuns: 100 },
    );
    t.ok(compared > 500, `${compared} replies compared over ${run} sequences`);
    t.ok(denials > 50, `denials too (${denials})`);
  });

  t.test("the store's decisions go through it, equal to the ioredis path's", async (t) => {
    const base = prefix.slice(0, -1);
    const ours = new RedisCounterStore({ url, prefix: `${base}-ours`, deadlineMs: 2000 });
    const theirs = new RedisCounterStore({ url, prefix: `${base}-io`, deadlineMs: 2000, ioredisDecisions: true });
    t.teardown(() => Promise.all([ours.close(), theirs.close()]));
    await Promise.all([ours.ready(), theirs.ready()]);
    t.ok(ours.decisions !== undefined && theirs.decisions === undefined);
    const limit: LimitParams = { algorithm: 'token_bucket', rate: 1, burst: 5, intervalMs: 3_600_000 };
    const global = { name: 'g', limit: { algorithm: 'fixed_window' as const, rate: 7, burst: 7, intervalMs: 86_400_000 } };
    const a: unknown[] = [];
    const b: unknown[] = [];
    for (let i = 0; i < 10; i++) {
      const key = `s${i % 3}`;
      const [x, y] = await Promise.all([ours.admit({ key, limit, global, cost: 1 }), theirs.admit({ key, limit, global, cost: 1 })]);
      // Reset instants come from Redis TIME a moment apart: compare the rest.
      a.push([x.allowed, x.binding, x.limit, x.remaining]);
      b.push([y.allowed, y.binding, y.limit, y.remaining]);
    }
    t.same(a, b);
    t.equal(a.filter((d) => (d as boolean[])[0]).length, 7, 'the global window admits 7');
  });

  t.test('an ACL user and a database from the URL; a wrong password refused with a clear error', async (t) => {
    const user = `resp-test-${randomBytes(4).toString('hex')}`;
    const pass = randomBytes(12).toString('hex');
    await redis.call('ACL', 'SETUSER', user, 'on', `>${pass}`, '~*', '+@all');
    t.teardown(() => redis.call('ACL', 'DELUSER', user));
    const u = new URL(url);
    const good = open(t, `redis://${user}:${pass}@${u.host}/3`);
    await good.ready(2000);
    t.equal(await good.call(['ACL', 'WHOAMI']), user, 'authenticated as the URL user');
    t.match(await good.call(['CLIENT', 'INFO']), / db=3 /, 'database 3 selected');

    const errors: Error[] = [];
    const bad = open(t, `redis://${user}:wrong@${u.host}/0`);
    bad.on('error', (e: Error) => errors.push(e));
    await waitFor(() => errors.length > 0, { what: 'the refusal' });
    t.match(errors[0]!.message, /AUTH refused: WRONGPASS/);
    const e = await failure(bad.call(['PING']));
    t.type(e, RespCallError);
    t.equal((e as RespCallError).kind, 'unavailable');
    t.match((e as Error).message, /not connected .*AUTH refused: WRONGPASS/, 'the call says why');
    await t.rejects(bad.ready(100), { message: /AUTH refused: WRONGPASS/ });

    const store = new RedisCounterStore({ url: `redis://${user}:wrong@${u.host}`, prefix: 'never', deadlineMs: 1000 });
    t.teardown(() => store.close());
    await waitFor(() => store.decisions!.lastError !== undefined, { what: 'the store to be refused' });
    const se = await failure(store.admit({ key: 'k', limit: { algorithm: 'fixed_window', rate: 1, burst: 1, intervalMs: 1000 }, cost: 1 }));
    t.type(se, CounterStoreError);
    t.equal((se as CounterStoreError).code, 'counter_store_unavailable', 'unavailable at once, not a timeout');
    t.match(((se as Error).cause as Error).message, /WRONGPASS/);
  });
});

t.test('a Redis of our own: NOSCRIPT, deadlines, a killed connection', async (t) => {
  const bin = findRedisServer();
  if (bin === undefined) throw new Error('redis-server is needed for this test');
  const server = await startRedisServer(bin);
  t.teardown(() => server.stop());
  const admin = new Redis(server.url);
  admin.on('error', () => undefined);
  t.teardown(() => admin.quit().catch(() => admin.disconnect()));
  const incr = respScript("return redis.call('INCR', KEYS[1])");

  t.test('NOSCRIPT after SCRIPT FLUSH: loaded once, every call in flight re-sent once, each run once', async (t) => {
    const c = open(t, server.url);
    await c.ready(2000);
    t.equal(await c.evalsha(incr, ['n'], []), 1, 'first use: NOSCRIPT, loaded, re-sent');
    await admin.script('FLUSH');
    const many = await Promise.all(Array.from({ length: 20 }, () => c.evalsha(incr, ['n'], [])));
    t.same(
      [...many].sort((x, y) => (x as number) - (y as number)),
      Array.from({ length: 20 }, (_, i) => i + 2),
    );
    t.equal(await admin.get('n'), '21', 'each call ran exactly once');
    t.equal(
      Number((await admin.info('commandstats')).match(/cmdstat_script\|load:calls=(\d+)/)?.[1]),
      2,
      'SCRIPT LOAD sent once per flush',
    );
    // A script error is the caller's error, not a NOSCRIPT loop.
    const boom = respScript("return redis.error_reply('ERR boom')");
    const e = await failure(c.evalsha(boom, [], []));
    t.type(e, RespError);
    t.match((e as Error).message, /boom/);
  });

  t.test('a deadline: the call rejects, its late reply is read and dropped, the order stays aligned', async (t) => {
    const c = open(t, server.url, 100);
    await c.ready(2000);
    // BLPOP holds the connection: the calls behind it wait in Redis until something is pushed.
    const held = [failure(c.call(['BLPOP', 'q', 0])), failure(c.evalsha(incr, ['late'], [])), failure(c.evalsha(incr, ['late'], []))];
    for (const e of await Promise.all(held)) {
      t.type(e, RespCallError);
      t.equal((e as RespCallError).kind, 'timeout');
    }
    t.equal(c.inFlight, 3, 'their places are kept');
    await admin.lpush('q', 'x');
    await waitFor(() => c.inFlight === 0, { what: 'the late replies to be read' });
    t.equal(await admin.get('late'), '2', 'the timed-out calls ran (a timeout says nothing about that)');
    t.equal(await c.call(['GET', 'late']), '2', 'the next call gets its own reply');

    // Through the store: counter_store_timeout.
    const store = new RedisCounterStore({ url: server.url, prefix: 'dl', deadlineMs: 100 });
    t.teardown(() => store.close());
    await store.ready();
    const req = { key: 'k', limit: { algorithm: 'fixed_window' as const, rate: 5, burst: 5, intervalMs: 86_400_000 }, cost: 1 };
    // Loaded first: a NOSCRIPT answered after the deadline would not be re-sent (the call is over).
    t.equal((await store.admit(req)).remaining, 4);
    await admin.client('PAUSE', 400, 'WRITE');
    const se = await failure(store.admit(req));
    t.type(se, CounterStoreError);
    t.equal((se as CounterStoreError).code, 'counter_store_timeout');
    await waitFor(() => store.decisions!.inFlight === 0, { timeoutMs: 5000, what: 'the pause to end and the late reply to be dropped' });
    const after = await store.admit(req);
    t.same([after.allowed, after.remaining], [true, 2], 'the timed-out decision was applied by Redis; the next reply is its own');
  });

  // The loop is held (synchronously) until Redis has run the call, so its reply is in the socket,
  // and past the call's deadline: the deadline timer then runs late, before the poll phase.
  const port = new URL(server.url).port;
  const holdLoopUntilRun = (key: string, deadlineMs: number): void => {
    const cli = join(dirname(bin), 'redis-cli');
    const until = performance.now() + 2 * deadlineMs;
    while (spawnSync(cli, ['-p', port, 'GET', key], { encoding: 'utf8' }).stdout.trim() !== '1' || performance.now() < until);
  };

  t.test('a loop held past the deadline: a reply waiting in the socket is on time, and timed as the loop’s', async (t) => {
    const late: Array<[number, number]> = [];
    const c = open(t, server.url, 50, { onLateReply: (loop, redis) => late.push([loop, redis]) });
    await c.ready(2000);
    const p = c.evalsha(incr, ['held'], []);
    await new Promise((r) => setImmediate(r)); // written (the flush runs first)
    holdLoopUntilRun('held', 50);
    t.equal(await p, 1, 'answered, not timed out');
    t.equal(late.length, 1, 'one late reply');
    t.ok(late[0]![0] > 0 && late[0]![1] === 0, `all of its lateness is the loop’s: ${JSON.stringify(late[0])}`);

    // The same through ioredis (leases, DPoP, a cluster's decisions).
    const lateIo: Array<[number, number]> = [];
    const store = new RedisCounterStore({
      url: server.url,
      prefix: 'held',
      deadlineMs: 50,
      ioredisDecisions: true,
      onLateReply: (loop, redis) => lateIo.push([loop, redis]),
    });
    t.teardown(() => store.close());
    await store.ready();
    // Called from the poll phase (a reply's callback), so that nothing reads the socket between the
    // write and the check phase where its deadline is stamped and the loop is then held.
    await admin.ping();
    const q = store.guard(store.client.incr('held-io'));
    await new Promise((r) => setImmediate(r));
    holdLoopUntilRun('held-io', 50);
    t.equal(await q, 1, 'answered through ioredis, not timed out');
    t.equal(lateIo.length, 1);
    t.ok(lateIo[0]![0] > 0 && lateIo[0]![1] === 0, `the loop’s: ${JSON.stringify(lateIo[0])}`);

    // A Redis that does not answer still fails within the deadline (plus the loop's delay).
    await admin.client('PAUSE', 400, 'WRITE');
    const e = await failure(store.guard(store.client.incr('held-io')));
    t.type(e, CounterStoreError);
    t.equal((e as CounterStoreError).code, 'counter_store_timeout');
    await waitFor(() => lateIo.length === 2, { timeoutMs: 5000, what: 'the late reply after the pause' });
    t.ok(lateIo[1]![1] > 0, `that one was Redis’s own lateness: ${JSON.stringify(lateIo[1])}`);
  });

  t.test('a killed connection: calls in flight rejected, never re-sent; a new connection follows', async (t) => {
    const c = open(t, server.url, 10_000);
    await c.ready(2000);
    const events: string[] = [];
    for (const ev of ['ready', 'close', 'reconnecting']) c.on(ev, () => events.push(ev));
    const id = await c.call(['CLIENT', 'ID']);
    const inFlight = [failure(c.call(['BLPOP', 'never', 0])), ...Array.from({ length: 5 }, () => failure(c.evalsha(incr, ['killed'], [])))];
    const listed = async () => String(await admin.client('LIST'));
    await waitFor(async () => new RegExp(`id=${id} .*cmd=blpop`).test(await listed()), { what: 'the connection to block' });
    t.equal(await admin.client('KILL', 'ID', String(id)), 1);
    for (const e of await Promise.all(inFlight)) {
      t.type(e, RespCallError);
      t.equal((e as RespCallError).kind, 'unavailable');
      t.match((e as Error).message, /not re-sent/);
    }
    await waitFor(() => c.status === 'ready', { what: 'the reconnect' });
    t.same(events, ['close', 'reconnecting', 'ready'], 'the connection events, in order');
    t.equal(await c.evalsha(incr, ['killed'], []), 1, 'answering again; the 5 calls in flight never ran');
    t.equal(await admin.get('killed'), '1');
  });

  t.test('close(): calls in flight answered, then closed for good; later calls refused at once', async (t) => {
    const c = new RespConnection({ url: server.url, deadlineMs: 2000, connectTimeoutMs: 2000 });
    await c.ready(2000);
    const p = c.evalsha(incr, ['closing'], []);
    const closed = c.close();
    t.equal(await p, 1);
    await closed;
    t.equal(c.status, 'end');
    const e = await failure(c.call(['PING']));
    t.equal((e as RespCallError).kind, 'unavailable');
  });
});

t.test('close() while never connected: ended at once, no reconnect scheduled', async (t) => {
  const port = await freePort();
  const c = new RespConnection({ url: `redis://127.0.0.1:${port}`, deadlineMs: 100, connectTimeoutMs: 2000 });
  const e = await failure(c.call(['PING']));
  t.equal((e as RespCallError).kind, 'unavailable', 'refused at once (no offline queue)');
  await c.close();
  t.equal(c.status, 'end');
  t.equal(c.listenerCount('ready'), 0);
});
