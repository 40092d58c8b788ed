// @tier: pure
import t from 'tap';
import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { jsonBody, operationalRoutes, route, type EdgeOptions } from '../../shared/http.js';
import { PlatformError } from '../../shared/errors.js';
import { createLogger } from '../../shared/log.js';
import { Counter, createRegistry } from '../../shared/metrics.js';
import { App, closeListenSocket, listen } from '../../shared/uws.js';

const MAX = 64;
const logLines: string[] = [];
const log = createLogger({ service: 'http-test', destination: { write: (s: string) => void logLines.push(s) } });
const opts: EdgeOptions = { log, maxBodyBytes: MAX };

const app = App();
route(
  app,
  'post',
  '/echo',
  (ctx) => ({ status: 201, body: { got: jsonBody(ctx), method: ctx.method, q: ctx.query.get('q'), test: ctx.headers['x-test'] } }),
  opts,
);
route(app, 'get', '/items/:id', (ctx) => ({ body: { id: ctx.params[0], path: ctx.path } }), opts);
route(
  app,
  'get',
  '/boom',
  () => {
    throw new Error('pool exhausted: postgres://app:hunter2@db/app');
  },
  opts,
);
route(
  app,
  'post',
  '/async-boom',
  async () => {
    await new Promise((r) => setImmediate(r));
    throw new TypeError("Cannot read properties of undefined (reading 'hunter2')");
  },
  opts,
);
route(
  app,
  'get',
  '/limited',
  () => {
    throw new PlatformError('rate_limited', { detail: 'quota spent', headers: { 'retry-after': '7' }, extra: { limit: 10 } });
  },
  opts,
);
route(app, 'del', '/things', () => ({ status: 204 }), opts);
route(app, 'get', '/teapot', () => ({ status: 418, body: { short: 'and stout' } }), opts);

const registry = createRegistry('http-test', { defaults: false });
const hits = new Counter({ name: 'http_test_hits_total', help: 'test counter', registers: [registry] });
hits.inc(3);
let postgresUp = true;
let isDraining = false;
operationalRoutes(app, {
  ...opts,
  registry,
  checks: [
    {
      name: 'postgres',
      check: async () => {
        if (!postgresUp) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
      },
    },
    { name: 'redis', check: async () => {} },
  ],
  draining: () => isDraining,
});

const { socket, port } = await listen(app, '127.0.0.1', 0);
const agent = new Agent({ keepAliveTimeout: 1000 });
t.teardown(async () => {
  await agent.close();
  closeListenSocket(socket);
});
const base = `http://127.0.0.1:${port}`;

async function call(method: string, path: string, init: { body?: string | Readable; headers?: Record<string, string> } = {}) {
  const res = await request(base + path, { method: method as 'GET', dispatcher: agent, body: init.body, headers: init.headers });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: res.headers, text, json: json as Record<string, unknown> };
}

const PROBLEM = 'application/problem+json';

t.test('a JSON handler gets the parsed body, query, headers and params', async (t) => {
  const r = await call('POST', '/echo?q=1', { body: '{"a":1}', headers: { 'content-type': 'application/json', 'x-test': 'yes' } });
  t.equal(r.status, 201);
  t.equal(r.headers['content-type'], 'application/json');
  t.same(r.json, { got: { a: 1 }, method: 'post', q: '1', test: 'yes' });
});

t.test(
  'route parameters are passed URL-decoded',

  async (t) => {
    const p = await call('GET', '/items/a%20b').catch((err: unknown) => ({ json: { error: String(err) } }));
    t.same(p.json, { id: 'a b', path: '/items/a%20b' });
  },
);

t.test('a body over the limit: 413 problem+json', async (t) => {
  const big = JSON.stringify({ pad: 'x'.repeat(MAX) });
  const r = await call('POST', '/echo', { body: big, headers: { 'content-type': 'application/json' } });
  t.equal(r.status, 413);
  t.equal(r.headers['content-type'], PROBLEM);
  t.match(r.json, {
    code: 'body_too_large',
    status: 413,
    title: 'The body is larger than allowed',
    detail: `body is larger than ${MAX} bytes`,
  });
  const after = await call('POST', '/echo', { body: '{"b":2}', headers: { 'content-type': 'application/json' } });
  t.same(after.json?.got, { b: 2 }, 'the next request (same agent) is answered normally');
});

t.test('a chunked body over the limit (no content-length): 413', async (t) => {
  async function* chunks() {
    for (let i = 0; i < 8; i++) yield Buffer.from('x'.repeat(16));
  }
  const r = await call('POST', '/echo', { body: Readable.from(chunks()), headers: { 'content-type': 'application/json' } });
  t.equal(r.status, 413);
  t.equal(r.json?.code, 'body_too_large');
});

t.test('invalid JSON: 400 invalid_json; not an object: 400 invalid_field; wrong type: 415', async (t) => {
  const bad = await call('POST', '/echo', { body: '{"a":', headers: { 'content-type': 'application/json' } });
  t.equal(bad.status, 400);
  t.equal(bad.headers['content-type'], PROBLEM);
  t.same(bad.json, {
    type: 'https://errors.edge-platform.dev/invalid_json',
    title: 'The body is not valid JSON',
    status: 400,
    code: 'invalid_json',
    detail: 'the body is not valid JSON',
    instance: '/echo',
  });
  const arr = await call('POST', '/echo', { body: '[1]', headers: { 'content-type': 'application/json' } });
  t.match(arr.json, { status: 400, code: 'invalid_field', field: 'body' });
  const form = await call('POST', '/echo', { body: 'a=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.match(form.json, { status: 415, code: 'unsupported_media_type' });
});

t.test('a thrown plain Error: generic 500, nothing leaked, the cause logged', async (t) => {
  const generic = {
    type: 'https://errors.edge-platform.dev/internal',
    title: 'Internal server error',
    status: 500,
    code: 'internal',
  };
  const before = logLines.length;
  const r = await call('GET', '/boom');
  t.equal(r.status, 500);
  t.equal(r.headers['content-type'], PROBLEM);
  t.same(r.json, { ...generic, instance: '/boom' });
  t.notMatch(r.text, /hunter2|pool|postgres|at /);
  const logged = logLines.slice(before).join('');
  t.match(logged, /pool exhausted/, 'the cause is in the log');
  const a = await call('POST', '/async-boom', { body: '' });
  t.same(a.json, { ...generic, instance: '/async-boom' });
  t.notMatch(a.text, /hunter2|Cannot read/);
});

t.test('a PlatformError: its status, code, detail, extras and headers', async (t) => {
  const r = await call('GET', '/limited');
  t.equal(r.status, 429);
  t.equal(r.headers['content-type'], PROBLEM);
  t.equal(r.headers['retry-after'], '7');
  t.same(r.json, {
    type: 'https://errors.edge-platform.dev/rate_limited',
    title: 'Too many requests',
    status: 429,
    code: 'rate_limited',
    detail: 'quota spent',
    limit: 10,
    instance: '/limited',
  });
});

t.test('204 has no body', async (t) => {
  const r = await call('DELETE', '/things');
  t.equal(r.status, 204);
  t.equal(r.text, '');
});

t.test('a status without a reason phrase in the table still makes a valid status line', async (t) => {
  const r = await call('GET', '/teapot');
  t.equal(r.status, 418);
  t.same(r.json, { short: 'and stout' });
});

t.test('/healthz', async (t) => {
  const r = await call('GET', '/healthz');
  t.equal(r.status, 200);
  t.same(r.json, { status: 'ok' });
});

t.test('/readyz: 200 when every check passes, 503 naming the failing one, 503 while draining', async (t) => {
  const ok = await call('GET', '/readyz');
  t.equal(ok.status, 200);
  t.same(ok.json, { status: 'ready', checks: { postgres: 'ok', redis: 'ok' } });
  postgresUp = false;
  t.teardown(() => {
    postgresUp = true;
  });
  const down = await call('GET', '/readyz');
  t.equal(down.status, 503);
  t.same(down.json, { status: 'not_ready', checks: { postgres: 'connect ECONNREFUSED 127.0.0.1:5432', redis: 'ok' } });
  postgresUp = true;
  isDraining = true;
  t.teardown(() => {
    isDraining = false;
  });
  const draining = await call('GET', '/readyz');
  t.equal(draining.status, 503);
  t.equal(draining.json?.status, 'draining');
  isDraining = false;
});

t.test('/metrics: Prometheus text', async (t) => {
  const r = await call('GET', '/metrics');
  t.equal(r.status, 200);
  t.match(r.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  t.match(r.text, /^# HELP http_test_hits_total test counter$/m);
  t.match(r.text, /^http_test_hits_total\{service="http-test"\} 3$/m);
});

t.test('an unknown path is 404 not_found, a known path with another method 405', async (t) => {
  const missing = await call('GET', '/nowhere/at/all');
  t.equal(missing.status, 404);
  t.equal(missing.headers['content-type'], PROBLEM);
  t.equal(missing.json.code, 'not_found');
  const wrong = await call('PUT', '/echo');
  t.equal(wrong.status, 405);
  t.equal(wrong.json.code, 'method_not_allowed');
  const params = await call('GET', '/items/a/b');
  t.equal(params.status, 404, 'a parameter matches exactly one segment');
});
