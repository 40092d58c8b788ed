// @tier: pure
/**
 * UPSTREAM_CONNECTIONS is one budget per upstream across both of the sidecar's clients (the h1
 * pool and undici's pool for streamed request bodies; limiter/upstream/budget.ts), counted where
 * it matters: by a raw upstream on node:net that counts the connections it has open, and holds or
 * answers each request as the test says.
 */
import t, { type Test } from 'tap';
import { Buffer } from 'node:buffer';
import { Readable } from 'node:stream';
import { createServer, type Socket } from 'node:net';
import { Upstreams } from '../../../limiter/proxy.js';
import { waitFor } from '../../harness/wait.js';

interface Held {
  head: string;
  answer(): void;
}

/**
 * A raw upstream: counts connections accepted and open (and the most open at once); answers each
 * request at once when `auto`, else holds it.
 */
async function countingUpstream(t: Test) {
  const state = { open: 0, maxOpen: 0, accepted: 0, auto: true, held: [] as Held[], served: 0 };
  const sockets: Socket[] = [];
  const server = createServer((s) => {
    state.accepted++;
    state.open++;
    sockets.push(s);
    s.on('error', () => {});
    // Open until the client's FIN is read. Counted after this turn's other events: a connection
    // closed just before this one was opened has its FIN in the same batch of socket events.
    s.on('end', () => state.open--);
    setImmediate(() => (state.maxOpen = Math.max(state.maxOpen, state.open)));
    let buf = '';
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.slice(0, end);
        let rest = buf.slice(end + 4);
        if (/\r\ntransfer-encoding: chunked/i.test(head)) {
          const last = rest.indexOf('0\r\n\r\n');
          if (last < 0) return;
          rest = rest.slice(last + 5);
        } else {
          const n = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
          if (rest.length < n) return;
          rest = rest.slice(n);
        }
        buf = rest;
        const h: Held = {
          head,
          answer: () => {
            state.served++;
            s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
          },
        };
        if (state.auto) h.answer();
        else state.held.push(h);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { origin: `http://127.0.0.1:${(server.address() as { port: number }).port}`, state };
}

function upstreams(t: Test, origin: string, connections: number): Upstreams {
  const u = new Upstreams([origin], {
    connections,
    pipelining: 1,
    headersTimeoutMs: 5000,
    bodyTimeoutMs: 5000,
    connectTimeoutMs: 2000,
    keepAliveTimeoutMs: 30_000,
    client: 'h1',
  });
  t.teardown(() => u.close(0));
  return u;
}

/** Sends one request through the Upstreams' client; resolves with the status and body, or the error. */
function request(u: Upstreams, method: string, body: Buffer | Readable | null): Promise<string> {
  return new Promise((resolve) => {
    let status = 0;
    let text = '';
    u.pool(0).dispatch(
      { method, path: '/v1/x', headers: [], body },
      {
        onConnect() {},
        onHeaders(s: number) {
          status = s;
          return true;
        },
        onData(chunk: Buffer) {
          text += chunk.toString();
          return true;
        },
        onComplete() {
          resolve(`${status} ${text}`);
        },
        onError(err: Error) {
          resolve(`error ${err.message}`);
        },
      },
    );
  });
}
/** A streamed request body (no length): the h1 pool hands it to undici. */
const streamed = (): Readable => Readable.from([Buffer.from('streamed body')]);

t.test('both clients together never open more than UPSTREAM_CONNECTIONS', async (t) => {
  const up = await countingUpstream(t);
  const u = upstreams(t, up.origin, 2);
  const budget = u.connectionBudget(0)!;
  t.ok(budget, 'an http: upstream on the h1 client has one budget');
  up.state.auto = false;
  const answers = [
    request(u, 'GET', null),
    request(u, 'POST', streamed()),
    request(u, 'GET', null),
    request(u, 'POST', streamed()),
    request(u, 'GET', null),
    request(u, 'POST', streamed()),
  ];
  // Two requests hold the two slots; the other four wait on the budget, not on a connection.
  await waitFor(() => up.state.held.length === 2 && budget.inUse === 2 && budget.waiters > 0, { what: 'two held, the rest waiting' });
  t.equal(up.state.open, 2, 'the upstream has two connections open');
  up.state.auto = true;
  for (const h of up.state.held.splice(0)) h.answer();
  t.same(await Promise.all(answers), Array(6).fill('200 ok'), 'all six answered, in turn');
  t.ok(up.state.maxOpen <= 2, `never more than 2 open at once (most: ${up.state.maxOpen})`);
  t.ok(up.state.accepted >= 2, `connections accepted: ${up.state.accepted}`);
});

t.test("undici's streamed body takes the slot of an idle h1 connection", async (t) => {
  const up = await countingUpstream(t);
  const u = upstreams(t, up.origin, 2);
  t.same(await Promise.all([request(u, 'GET', null), request(u, 'GET', null)]), ['200 ok', '200 ok']);
  await waitFor(() => up.state.open === 2, { what: 'two h1 connections open' });
  // Both slots are idle h1 connections: one is closed for undici, at once (not at the 30 s idle timeout).
  t.equal(await request(u, 'POST', streamed()), '200 ok', 'the streamed POST is answered');
  t.ok(up.state.maxOpen <= 2, `never more than 2 open at once (most: ${up.state.maxOpen})`);
  t.equal(await request(u, 'GET', null), '200 ok', 'the h1 pool goes on');
});

t.test("an h1 request waits for undici's slot, and takes it when undici's connection closes", async (t) => {
  const up = await countingUpstream(t);
  const u = upstreams(t, up.origin, 1);
  const budget = u.connectionBudget(0)!;
  up.state.auto = false;
  const post = request(u, 'POST', streamed());
  await waitFor(() => up.state.held.length === 1, { what: 'the streamed POST held' });
  const get = request(u, 'GET', null);
  await waitFor(() => budget.waiters === 1, { what: 'the GET waiting for the slot' });
  t.equal(up.state.open, 1, 'one connection open');
  up.state.auto = true;
  up.state.held.shift()!.answer();
  t.same(await Promise.all([post, get]), ['200 ok', '200 ok'], 'both answered');
  t.equal(up.state.maxOpen, 1, 'never two at once');
  t.equal(budget.inUse, up.state.open, 'the budget counts what is open');
});
