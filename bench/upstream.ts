/**
 * The minimal upstream the sidecar benchmark proxies to: every method and path answers 200 with a
 * short text body. Run in its own process by bench/sidecar.ts, so it never shares an event loop
 * with the proxy under test or the load generator.
 *
 * `node dist/bench/upstream.js <port> [uws|node]`. uWS (the default) because it costs the least CPU
 * per request: on a 2-core machine the upstream shares a core with the load generator, and the less
 * it takes the more the numbers say about the proxy. `node` (node:http) is there to compare.
 */
import { createServer } from 'node:http';
import { App, listen } from '../shared/uws.js';

const BODY = 'ok\n';
const port = Number(process.argv[2] ?? 0);
const kind = process.argv[3] ?? 'uws';

if (kind === 'node') {
  const server = createServer((req, res) => {
    // Drain any request body, then answer: keep-alive needs the request read to its end.
    req.resume();
    req.once('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': BODY.length });
      res.end(BODY);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, '127.0.0.1', () => console.log(`upstream (node:http) on ${port}`));
  process.once('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
} else if (kind === 'uws') {
  const app = App();
  app.any('/*', (res) => {
    res.cork(() => {
      res.writeStatus('200 OK').writeHeader('content-type', 'text/plain').end(BODY);
    });
  });
  await listen(app, '127.0.0.1', port);
  console.log(`upstream (uWS) on ${port}`);
  process.once('SIGTERM', () => process.exit(0));
} else {
  console.error(`unknown upstream kind "${kind}": uws or node`);
  process.exit(2);
}
