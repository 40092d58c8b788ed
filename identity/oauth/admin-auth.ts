/**
 * Who may call identity's admin API under /auth/admin/ for clients and signing keys: a caller
 * presenting `Authorization: Bearer <IDENTITY_ADMIN_TOKEN>`, or an access token of ours whose
 * role is `admin`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { PlatformError } from '../../shared/errors.js';
import type { RequestContext } from '../../shared/http.js';
import { authenticateBearer, bearerToken } from './bearer.js';
import type { OAuthRuntime } from './runtime.js';

function sameSecret(a: string, b: string): boolean {
  // Hashing first makes the comparison constant-time whatever the lengths.
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** Resolves for an admin caller; 401 without credentials or with a bad token, 403 for another role. */
export async function requireAdmin(rt: OAuthRuntime, ctx: RequestContext, what: string): Promise<void> {
  const token = bearerToken(ctx);
  const admin = rt.settings.adminToken;
  if (admin !== undefined && sameSecret(token, admin)) return;
  const caller = await authenticateBearer(rt, ctx);
  if (caller.claims.role !== 'admin') throw new PlatformError('forbidden', { detail: `${what} needs the admin role` });
}
