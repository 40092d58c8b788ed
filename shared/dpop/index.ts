/**
 * DPoP (RFC 9449): proof validation for the token endpoint and every resource server, the replay
 * stores, server nonces and the thumbprint. See proof.ts.
 */
export { DEFAULT_DPOP_ALGS, DpopError, isDpopError, type DpopAlg, type DpopRejectReason, type DpopRfcError } from './errors.js';
export { expectedHtu, normaliseHtu } from './htu.js';
export { importProofKey, jwkThumbprint, thumbprintInput, type ProofKey } from './jwk.js';
export { createNonceSource, type DpopNonces } from './nonce.js';
export {
  DPOP_DEFAULTS,
  accessTokenHash,
  checkDpopProof,
  createDpopVerifier,
  singleDpopHeader,
  type CheckedProof,
  type DpopCheckOptions,
  type DpopRequest,
  type DpopVerifier,
  type DpopVerifierOptions,
} from './proof.js';
export type { DpopReplayStore } from './replay-store.js';
export { MemoryReplayStore } from './replay-store.memory.js';
export { RedisReplayStore, type RedisSetNx } from './replay-store.redis.js';
