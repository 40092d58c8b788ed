/**
 * Access-token verifications per second on one core: the shared verifier (ES256 and RS256, with
 * its token cache off, so every call checks a signature; and a cache hit) beside jose's
 * `jwtVerify` with the same rules as the peer. Tokens are distinct unless the row says otherwise.
 *
 * Run: `npx tsc -b && node dist/bench/jwt-verify.js [seconds-per-row]`. Target (README, "Benchmarks"):
 * ≥ 10,000 ES256 verifications/s per core.
 */
import { cpus } from 'node:os';
import { importJWK, jwtVerify } from 'jose';
import { createVerifier } from '../shared/jwt/index.js';
import { accessClaims, generateTestKey, jwksOf, sign, TEST_AUDIENCE, TEST_ISSUER } from '../test/harness/tokens.js';

const SECONDS = Number(process.argv[2] ?? 2);
const DISTINCT = 20_000;

interface Row {
  name: string;
  ops: number;
  usPerOp: number;
}

async function measure(name: string, run: (i: number) => Promise<unknown>): Promise<Row> {
  for (let i = 0; i < 2_000; i++) await run(i); // warm up
  const deadline = performance.now() + SECONDS * 1000;
  const start = performance.now();
  let n = 0;
  while (performance.now() < deadline) {
    for (let k = 0; k < 500; k++) await run(n++);
  }
  const ms = performance.now() - start;
  return { name, ops: Math.round((n / ms) * 1000), usPerOp: Math.round((ms / n) * 1000 * 10) / 10 };
}

const es = await generateTestKey('ES256', 'bench-es');
const rs = await generateTestKey('RS256', 'bench-rs');
const nowMs = Date.now();
const mint = (key: typeof es): string[] =>
  Array.from({ length: DISTINCT }, (_, i) =>
    sign(accessClaims({ nowMs, ttlSec: 3600 }, { sub: `user-${i}`, user_id: `user-${i}` }), { key }),
  );
const esTokens = mint(es);
const rsTokens = mint(rs);

const uncached = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: jwksOf(es, rs), tokenCacheSize: 0 });
const cached = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: jwksOf(es, rs) });
await uncached.ready();
await cached.ready();
const esKey = await importJWK(es.publicJwk, 'ES256');
const joseOpts = { algorithms: ['ES256'], issuer: TEST_ISSUER, audience: TEST_AUDIENCE, typ: 'at+jwt' };

const rows: Row[] = [];
rows.push(await measure('jose jwtVerify ES256 (peer, WebCrypto)', (i) => jwtVerify(esTokens[i % DISTINCT]!, esKey, joseOpts)));
rows.push(await measure('shared verifier ES256, distinct tokens', (i) => uncached.verifyAccessToken(esTokens[i % DISTINCT]!)));
rows.push(await measure('shared verifier RS256, distinct tokens', (i) => uncached.verifyAccessToken(rsTokens[i % DISTINCT]!)));
rows.push(await measure('shared verifier ES256, token cache hit', (i) => cached.verifyAccessToken(esTokens[i % 100]!)));
uncached.close();
cached.close();

const peer = rows[0]!.ops;
console.log(
  `\nJWT verification, one core (${cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${new Date().toISOString().slice(0, 10)})\n`,
);
console.log('| case | verifications/s | µs/op | × jose |');
console.log('|---|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.name} | ${r.ops.toLocaleString('en')} | ${r.usPerOp} | ${(r.ops / peer).toFixed(2)} |`);
const es256 = rows[1]!.ops;
console.log(`\nES256 target ≥ 10,000/s per core: ${es256 >= 10_000 ? 'met' : 'NOT met'} (${es256.toLocaleString('en')}/s)`);
