// @tier: pure
/**
 * startHttpService's close() (shared/service.ts), over raw keep-alive connections: a request in
 * flight gets its whole answer, then every connection left is closed, idle ones included. Left
 * open, an idle keep-alive connection could carry a request after close() resolved, and kept the
 * event loop of a process embedding the service alive until the client's keep-alive timeout.
 */
import t, { type Test } from 'tap';
import { connect, type Socket } from 'node:net';
import { createRegistry } from '../../shared/metrics.js';
import { startHttpService, type HttpService } from '../../shared/service.js';
import { route } from '../../shared/http.js';
import { testLogger } from '../harness/log.js';
import { waitFor } from '../harness/wait.js';

interface Raw {
  socket: Socket;
  /** Everything received so far. */
  received(): string;
  closed(): boolean;
}

function open(port: number): Promise<Raw> {
  return new Promise((resolve, reject) => {
    let data = '';
    let closed = false;
    const socket = connect({ host: '127.0.0.1', port });
    socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
    socket.on('close', () => (closed = true));
    socket.on('error', () => {});
    socket.once('connect', () => resolve({ socket, received: () => data, closed: () => closed }));
    socket.once('error', reject);
  });
}

/** The answers received on a connection (each begins with its status line). */
const answers = (raw: Raw): number => raw.received().split('HTTP/1.1 ').length - 1;

async function start(t: Test, slow?: Promise<void>, called?: () => void): Promise<HttpService> {
  const http = await startHttpService({
    name: 'service-test',
    host: '127.0.0.1',
    port: 0,
    log: testLogger(),
    registry: createRegistry('service-test'),
    maxBodyBytes: 1024,
    checks: [],
    routes: (app, edge) =>
      route(
        app,
        'get',
        '/slow',
        async () => {
          called?.();
          await slow;
          return { body: { done: true } };
        },
        edge,
      ),
  });
  t.teardown(() => http.close(0));
  return http;
}

t.test('close() ends an idle keep-alive connection: nothing can follow on it', async (t) => {
  const http = await start(t);
  const raw = await open(http.port);
  raw.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await waitFor(() => /\r\n\r\n\{[\s\S]*\}$/.test(raw.received()), { what: 'the /healthz answer' });
  t.match(raw.received(), /^HTTP\/1\.1 200 /, 'answered');
  t.notMatch(raw.received(), /connection: close/i, 'and kept alive');
  t.notOk(raw.closed(), 'the connection is open, idle, before close()');
  await http.close(1000);
  await waitFor(() => raw.closed(), { what: 'the idle connection to be closed by close()' });
  t.pass('closed once close() resolved');
  t.equal(answers(raw), 1, 'nothing more was sent on it');
});

t.test('a request in flight at close() gets its whole answer; then its connection is closed', async (t) => {
  let release!: () => void;
  const slow = new Promise<void>((r) => (release = r));
  let arrived = false;
  const http = await start(t, slow, () => (arrived = true));
  const raw = await open(http.port);
  raw.socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
  await waitFor(() => arrived, { what: 'the slow request to reach its handler' });
  let closed = false;
  const closing = http.close(10_000).then(() => (closed = true));
  await new Promise((r) => setImmediate(r));
  t.notOk(closed, 'close() waits for the request in flight');
  t.notOk(raw.closed(), 'and leaves its connection open meanwhile');
  release();
  await closing;
  await waitFor(() => raw.closed(), { what: 'the connection to be closed after the answer' });
  t.match(raw.received(), /^HTTP\/1\.1 200 [\s\S]*\r\n\r\n\{"done":true\}$/, 'the whole answer arrived before the connection closed');
});
