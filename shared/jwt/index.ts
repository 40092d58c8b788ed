/**
 * Access-token verification for resource servers (the sidecar and identity). See verifier.ts.
 */
export {
  checkBinding,
  createVerifier,
  VERIFIER_DEFAULTS,
  type TokenBinding,
  type Verifier,
  type VerifierOptions,
  type VerifierStats,
} from './verifier.js';
export { quotaSubjectOf, validateAccessClaims, type AccessClaims, type ClaimExpectations } from './claims.js';
export { TokenError, isTokenError, type TokenRejectReason } from './errors.js';
export {
  importPinnedKey,
  isAcceptableKid,
  pinnedAlgOf,
  KeyImportError,
  MAX_KID_LENGTH,
  MIN_RSA_BITS,
  type JwksDocument,
  type PinnedAlg,
  type PinnedKey,
} from './keys.js';
export {
  RevocationList,
  RevokedSet,
  parseRevocationDocument,
  MAX_REVOCATION_LIST_BYTES,
  type RevocationListStats,
  type RevocationDocumentEntries,
} from './revocation-list.js';
