/**
 * Refresh-token rotation with reuse detection and a retry grace window.
 *
 * Every use of a refresh token rotates it: the presented token is marked rotated out and exactly
 * one successor is issued, in one statement that first locks the token's row (grant-store.ts
 * `rotateStatement`). Two requests racing with one token are serialised by that lock: the first
 * rotates, the second finds the token rotated a moment ago. What happens to a rotated-out token
 * presented again:
 *
 * - within the grace window (`IDENTITY_REFRESH_GRACE`) after its rotation, and while its successor
 *   is still unused, the request gets the **same successor** again (computed, not stored: see
 *   opaque.ts). A client whose first answer was lost to a timeout, or two tabs refreshing at once,
 *   keep working instead of being logged out (the top complaint against Keycloak and
 *   node-oidc-provider, whose retries revoke);
 * - otherwise it is reuse: a stolen copy, or the legitimate client after the thief rotated. We
 *   cannot tell which, so the whole family (the grant) is revoked, which forces re-authentication,
 *   and a `RefreshTokenReuseDetected` alert is recorded in the same transaction.
 *
 * `decideRotation` is the rule as a pure function; the statement applies its `rotate` case.
 */
import { withTransaction, type Pool } from '../../shared/db.js';
import { isCurrent, revokeGrant, rotateStatement, type Grant } from './grant-store.js';
import { refreshTokenBytes, refreshTokenHash } from './opaque.js';
import { recordSecurityEvent, type SecurityAlert } from './security-events.js';

export type RefuseReason = 'unknown' | 'expired' | 'revoked' | 'client_mismatch' | 'scope_not_granted' | 'dpop_key_mismatch';

export type RotationDecision =
  | { readonly kind: 'rotate' }
  | { readonly kind: 'replay' }
  | { readonly kind: 'reuse' }
  | { readonly kind: 'refuse'; readonly reason: RefuseReason };

/** What the rule looks at of the presented token. */
export interface PresentedToken {
  readonly grant: Grant;
  readonly expiresAt: number;
  readonly rotatedAt: number | undefined;
}

/**
 * The rule, given the presented token (undefined: no such token), the client presenting it and
 * the scopes it asks for, whether the token's successor is still current, and the time. Pure.
 */
export function decideRotation(
  t: PresentedToken | undefined,
  req: { clientId: string; scopes: readonly string[] | undefined; jkt?: string | undefined },
  successorCurrent: boolean,
  nowMs: number,
  graceMs: number,
): RotationDecision {
  if (!t) return { kind: 'refuse', reason: 'unknown' };
  // Another client's token is refused before anything else: it reveals and changes nothing.
  if (t.grant.clientId !== req.clientId) return { kind: 'refuse', reason: 'client_mismatch' };
  // A DPoP-bound family (RFC 9449 §5) is refreshed only with a proof of its key. Checked before
  // the rotation state: whoever lacks the key can neither rotate nor revoke the family.
  if (t.grant.dpopJkt !== undefined && t.grant.dpopJkt !== req.jkt) return { kind: 'refuse', reason: 'dpop_key_mismatch' };
  if (t.grant.revokedAt !== undefined) return { kind: 'refuse', reason: 'revoked' };
  // A narrower scope may be asked for, never a wider one (RFC 6749 §6); checked before rotating,
  // so a refused request leaves the token usable.
  if (req.scopes !== undefined) {
    const granted = t.grant.scope.split(' ');
    if (req.scopes.some((s) => !granted.includes(s))) return { kind: 'refuse', reason: 'scope_not_granted' };
  }
  if (t.rotatedAt === undefined) return t.expiresAt <= nowMs ? { kind: 'refuse', reason: 'expired' } : { kind: 'rotate' };
  if (nowMs - t.rotatedAt < graceMs && successorCurrent) return { kind: 'replay' };
  return { kind: 'reuse' };
}

export type RotationOutcome =
  | { readonly kind: 'rotated' | 'replayed'; readonly refreshToken: string; readonly grant: Grant }
  | { readonly kind: 'reuse_detected'; readonly grant: Grant; readonly alert: SecurityAlert | undefined }
  | { readonly kind: 'refused'; readonly reason: RefuseReason };

export interface RotationOptions {
  clientId: string;
  /** Scopes asked for with this refresh (a subset of the grant's), or undefined for all. */
  scopes?: readonly string[] | undefined;
  nowMs: number;
  graceMs: number;
  /** Lifetime of the successor. */
  ttlMs: number;
  /** Thumbprint of the request's DPoP proof key, if it had one. */
  jkt?: string | undefined;
}

/** Rotates `presented` (see the module comment). */
export async function rotateRefreshToken(pool: Pool, presented: string, opts: RotationOptions): Promise<RotationOutcome> {
  const raw = refreshTokenBytes(presented);
  if (!raw) return { kind: 'refused', reason: 'unknown' };
  const row = await rotateStatement(pool, {
    tokenSha256: refreshTokenHash(raw),
    raw,
    clientId: opts.clientId,
    scopes: opts.scopes ?? [],
    nowMs: opts.nowMs,
    ttlMs: opts.ttlMs,
    jkt: opts.jkt,
  });
  if (row?.rotatedNow) return { kind: 'rotated', refreshToken: row.successor.toString('base64url'), grant: row.grant };

  // Not rotated now: refused, a retry, or reuse. The successor is read in a new statement, so it
  // sees a rotation that committed while this request waited for the row lock.
  const successorCurrent = row?.successorSha256 !== undefined && (await isCurrent(pool, row.successorSha256));
  const d = decideRotation(
    row,
    { clientId: opts.clientId, scopes: opts.scopes, jkt: opts.jkt },
    successorCurrent,
    opts.nowMs,
    opts.graceMs,
  );
  switch (d.kind) {
    case 'refuse':
      return { kind: 'refused', reason: d.reason };
    case 'replay':
      return { kind: 'replayed', refreshToken: row!.successor.toString('base64url'), grant: row!.grant };
    case 'rotate':
      // The statement applies exactly this case; reaching it means the two disagree.
      throw new Error('refresh rotation: the statement did not rotate a token the rule says to rotate');
    case 'reuse': {
      const grant = row!.grant;
      const alert = await withTransaction(pool, async (db) => {
        // Two stale presentations at once revoke once and raise one alert.
        if (!(await revokeGrant(db, grant.grantId, 'refresh_token_reuse', opts.nowMs))) return undefined;
        const a: SecurityAlert = {
          type: 'RefreshTokenReuseDetected',
          userId: grant.userId,
          clientId: grant.clientId,
          familyId: grant.grantId,
          at: opts.nowMs,
        };
        await recordSecurityEvent(db, a);
        return a;
      });
      return { kind: 'reuse_detected', grant: { ...grant, revokedAt: opts.nowMs }, alert };
    }
  }
}
