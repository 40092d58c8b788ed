/**
 * DPoP verification cost per core (issue 16): what the sidecar does for `Authorization: Bearer`
 * (one ES256 access-token verification) beside `Authorization: DPoP` (the proof checked, the token
 * verified and bound to the proof's key, the proof's jti recorded in the in-process replay store),
 * side by side in one process. Every row uses distinct tokens and distinct proofs, with the token
 * cache off, so each call verifies its signatures; one row has the token cache on (the realistic
 * edge: one token, a new proof per request). The proof keys come from a pool of 100 clients, as
 * at the edge, where the imported key is cached; one row uses a new key for every proof.
 *
 * Run: `npx tsc -b && node dist/bench/dpop.js [seconds-per-row]`. Prints a table for
 * bench/RESULTS.md, "DPoP verification at the edge (issue 16)".
 */
import { generateKeyPairSync, randomBytes, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { accessTokenHash, checkDpopProof, jwkThumbprint, MemoryReplayStore } from '../shared/dpop/index.js';
import { createVerifier } from '../shared/jwt/index.js';
import { accessClaims, generateTestKey, jwksOf, sign, TEST_AUDIENCE, TEST_ISSUER } from '../test/harness/tokens.js';

const SECONDS = Number(process.argv[2] ?? 2);
const DISTINCT = 20_000;
const CLIENTS = 100;
const HTU = 'https://api.example.com/v1/things';

interface Row {
  name: string;
  ops: number;
  usPerOp: number;
}

async function measure(name: string, run: (i: number) => unknown): Promise<Row> {
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

const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');

interface Client {
  priv: KeyObject;
  jwk: Record<string, unknown>;
  jkt: string;
}
function newClient(): Client {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' }) as Record<string, unknown>;
  return { priv: privateKey, jwk, jkt: jwkThumbprint(jwk) };
}

function proofFor(c: Client, token: string, iat: number): string {
  const input = `${b64({ typ: 'dpop+jwt', alg: 'ES256', jwk: c.jwk })}.${b64({
    jti: randomBytes(16).toString('base64url'),
    htm: 'GET',
    htu: HTU,
    iat,
    ath: accessTokenHash(token),
  })}`;
  return `${input}.${cryptoSign('sha256', Buffer.from(input), { key: c.priv, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
}

const es = await generateTestKey('ES256', 'bench-dpop');
const nowMs = Date.now();
const iat = Math.floor(nowMs / 1000);
const clients = Array.from({ length: CLIENTS }, newClient);
const bearerTokens: string[] = [];
const boundTokens: string[] = [];
const proofs: string[] = [];
for (let i = 0; i < DISTINCT; i++) {
  const c = clients[i % CLIENTS]!;
  const claims = accessClaims({ nowMs, ttlSec: 3600 }, { sub: `user-${i}`, user_id: `user-${i}` });
  bearerTokens.push(sign(claims, { key: es }));
  const bound = sign({ ...claims, cnf: { jkt: c.jkt } }, { key: es });
  boundTokens.push(bound);
  proofs.push(proofFor(c, bound, iat));
}
// One token per client for the cached row; a new key for every proof for the key-import row.
const oneTokenPerClient = clients.map((c, i) =>
  sign(accessClaims({ nowMs, ttlSec: 3600 }, { sub: `c-${i}`, user_id: `c-${i}`, cnf: { jkt: c.jkt } }), { key: es }),
);
const cachedProofs = Array.from({ length: DISTINCT }, (_, i) => proofFor(clients[i % CLIENTS]!, oneTokenPerClient[i % CLIENTS]!, iat));
const freshKeyProofs = Array.from({ length: 5_000 }, (_, i) => proofFor(newClient(), boundTokens[i]!, iat));

const clock = { now: () => nowMs };
const uncached = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: jwksOf(es), tokenCacheSize: 0, clock });
const cached = createVerifier({ issuer: TEST_ISSUER, audience: TEST_AUDIENCE, keys: jwksOf(es), clock });
await uncached.ready();
await cached.ready();
const replay = new MemoryReplayStore(clock, 10_000_000);
const opts = { iatWindowSec: 3600 };

const rows: Row[] = [];
rows.push(await measure('Bearer: ES256 access token alone (peer)', (i) => uncached.verifyAccessToken(bearerTokens[i % DISTINCT]!)));
rows.push(
  await measure('DPoP proof check alone (ES256, jwk cached)', (i) =>
    checkDpopProof(proofs[i % DISTINCT]!, { method: 'GET', htu: HTU, accessToken: boundTokens[i % DISTINCT]! }, nowMs, opts),
  ),
);
rows.push(
  await measure('DPoP: proof + bound ES256 token + jti recorded', async (i) => {
    const t = boundTokens[i % DISTINCT]!;
    const p = checkDpopProof(proofs[i % DISTINCT]!, { method: 'GET', htu: HTU, accessToken: t }, nowMs, opts);
    await uncached.verifyAccessToken(t, { jkt: p.jkt });
    // A unique key per call: the pregenerated proofs repeat, a real client's never do.
    return replay.claimSync(`${p.replayKey}.${i}`, p.replayTtlMs);
  }),
);
rows.push(
  await measure('DPoP with the token cache on (one token per client)', async (i) => {
    const t = oneTokenPerClient[i % CLIENTS]!;
    const p = checkDpopProof(cachedProofs[i % DISTINCT]!, { method: 'GET', htu: HTU, accessToken: t }, nowMs, opts);
    await cached.verifyAccessToken(t, { jkt: p.jkt });
    return replay.claimSync(`c.${p.replayKey}.${i}`, p.replayTtlMs);
  }),
);
rows.push(
  await measure('DPoP proof check, a new client key every time', (i) =>
    checkDpopProof(freshKeyProofs[i % 5_000]!, { method: 'GET', htu: HTU, accessToken: boundTokens[i % 5_000]! }, nowMs, opts),
  ),
);
uncached.close();
cached.close();

const peer = rows[0]!.ops;
console.log(
  `\nDPoP verification, one core (${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${new Date().toISOString()}, load ${loadavg()[0]!.toFixed(1)})\n`,
);
console.log('| case | per second | µs/op | × Bearer |');
console.log('|---|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.name} | ${r.ops.toLocaleString('en')} | ${r.usPerOp} | ${(r.ops / peer).toFixed(2)} |`);
