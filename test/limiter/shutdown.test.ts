// @tier: pure
/**
 * Graceful shutdown: close() stops taking connections at once, reports draining on /readyz, lets a
 * slow request in flight finish, and resolves only after it; a request that would outlive the
 * grace period does not hold close() past it; once drained, no connection is left open, idle
 * keep-alive ones on either port included.
 */
import t from 'tap';
import { connect } from 'node:net';
import { startUpstream, type Echo } from '../harness/upstream.js';
import { waitFor } from '../harness/wait.js';
import { client, fixedQuota, keySubject, newApiKey, startTestSidecar } from './fixtures/sidecar.js';

const up = await startUpstream();
t.teardown(() => up.close());
const KEY = newApiKey('shutdown');
const quotas = [fixedQuota(keySubject(KEY), 100)];

/** Resolves 'refused' when nothing accepts a connection on the port, 'accepted' otherwise. */
function tryConnect(port: number): Promise<'refused' | 'accepted'> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve('accepted');
    });
    s.once('error', () => resolve('refused'));
  });
}

t.test('close() drains a slow request in flight and refuses new connections', async (t) => {
  const sc = await startTestSidecar(t, { upstream: up.url, quotas });
  const call = client(t);
  const before = up.requests.length;
  const slow = call(`${sc.base}/v1/slow?mode=delay&ms=600`, { headers: { 'x-api-key': KEY } });
  const seen = await up.waitForRequest(before + 1);
  const closeStarted = Date.now();
  // When close() resolves: had the upstream answered the request in flight (sentLength is set when
  // it sends its response)?
  let upstreamAnsweredFirst: boolean | undefined;
  const closing = sc.close().then(() => {
    upstreamAnsweredFirst = seen.sentLength >= 0;
    t.comment(`close() resolved after ${Date.now() - closeStarted} ms (the upstream answers after 600)`);
  });

  t.equal(await tryConnect(sc.sidecar.port), 'refused', 'new connections to the data port are refused at once');
  const ready = await call(`${sc.admin}/readyz`);
  t.equal(ready.status, 503, '/readyz says not ready while draining');
  t.match(ready.json(), { status: 'draining' });

  const r = await slow;
  t.equal(r.status, 200, 'the request in flight finished');
  t.equal(r.json<Echo>().path, '/v1/slow', 'with its whole response');
  await closing;
  t.equal(upstreamAnsweredFirst, true, 'close() waited for the request in flight: it resolved after the upstream answered');
  t.equal(await tryConnect(sc.sidecar.adminPort), 'refused', 'the admin port is closed after the drain');
});

t.test('a request that outlives the grace period does not hold close() past it', async (t) => {
  const sc = await startTestSidecar(t, { upstream: up.url, quotas, env: { UPSTREAM_TIMEOUT: '4s' } });
  const call = client(t);
  const before = up.requests.length;
  const hanging = call(`${sc.base}/v1/forever?mode=hang`, { headers: { 'x-api-key': KEY } }).catch((err: unknown) => err);
  const seen = await up.waitForRequest(before + 1);
  const started = Date.now();
  let ended = false;
  const outcome = hanging.finally(() => (ended = true));
  await sc.sidecar.close(300);
  t.comment(`close(300) returned in ${Date.now() - started} ms`);
  await waitFor(() => seen.aborted, { what: 'the upstream to see its request cut' });
  await waitFor(() => ended, { what: 'the abandoned request to be ended, not left open' });
  t.pass('the abandoned request was ended, not left open, and the upstream saw it cut');
  const r = await outcome;
  t.notMatch(r, { status: 504 }, 'ended by close(), not answered by the 4 s upstream timeout');
});

t.test('close() closes the idle keep-alive connections on the data and admin ports', async (t) => {
  const sc = await startTestSidecar(t, { upstream: up.url, quotas });
  /** A raw connection: what it received, and whether it was closed. */
  const open = async (port: number, request: string) => {
    const s = connect({ host: '127.0.0.1', port });
    let data = '';
    let closed = false;
    s.on('data', (c: Buffer) => (data += c.toString('latin1')));
    s.on('close', () => (closed = true));
    s.on('error', () => {});
    await new Promise((r) => s.once('connect', r));
    s.write(request);
    await waitFor(() => /\r\n\r\n\{[\s\S]*\}$/.test(data), { what: `an answer on port ${port}` });
    return { data: () => data, closed: () => closed };
  };
  const data = await open(sc.sidecar.port, `GET /v1/kept HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${KEY}\r\n\r\n`);
  const admin = await open(sc.sidecar.adminPort, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  t.match(data.data(), /^HTTP\/1\.1 200 /, 'a request through the data port, answered');
  t.match(admin.data(), /^HTTP\/1\.1 200 /, 'and one on the admin port');
  t.notOk(data.closed() || admin.closed(), 'both connections kept alive, idle');
  await sc.close();
  await waitFor(() => data.closed() && admin.closed(), { what: 'both idle connections to be closed by close()' });
  t.pass('closed once close() resolved');
});
