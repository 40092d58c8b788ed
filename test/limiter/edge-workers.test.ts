/**
 * The raw-byte suite (edge.test.ts) once more, with every sidecar it starts run as
 * `LIMITER_WORKERS=2` worker threads on one data port (test/limiter/fixtures/sidecar.ts reads
 * TEST_LIMITER_WORKERS): the same bytes in, the same answers and the same bytes upstream, whichever
 * thread takes each connection. edge.test.ts is the one re-run: it holds every framing, target,
 * header and refusal case; split-reads.test.ts is not, because its "read before the second write"
 * relies on the sidecar sharing the test's event loop, which worker threads do not.
 */
process.env.TEST_LIMITER_WORKERS = '2';
await import('./edge.test.js');
