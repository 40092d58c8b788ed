/**
 * The signing keys' admin API, under `/auth/admin/keys` (JSON, problem+json errors), for the same
 * callers as the client registry (`Authorization: Bearer <IDENTITY_ADMIN_TOKEN>`, or an access
 * token of ours with role `admin`):
 *
 * - `GET /auth/admin/keys`: every stored key with its state (`pending`, `signing`, `verifying`,
 *   `retired`, `revoked`) and schedule; never key material;
 * - `POST /auth/admin/keys/:kid/revoke`, optional body `{ "reason": "..." }`: emergency revocation
 *   (revocation.ts). The key leaves the JWKS and stops signing on this replica before the answer,
 *   on the other replicas within seconds (key-watch.ts), and stops verifying at every sidecar one
 *   JWKS_REFRESH_INTERVAL and one fetch after that. Answers 200 with the successor that signs from
 *   now on, if the key was the signing key; again 200 (`already_revoked: true`) for a revoked key;
 *   404 for a kid that is not ours (or retired and deleted: it verifies nothing already).
 */
import { PlatformError, invalidField } from '../../shared/errors.js';
import { jsonBody, type Handler } from '../../shared/http.js';
import { requireAdmin } from '../oauth/admin-auth.js';
import type { OAuthRuntime } from '../oauth/runtime.js';
import { publishedKeysAt, signingKeyAt } from './key-schedule.js';
import { listKeyStatus, type KeyStatusRecord } from './key-store.js';
import { MAX_REASON_LENGTH } from './revocation.js';

const NO_STORE = { 'cache-control': 'no-store' };
const WHAT = 'signing-key administration';

export type KeyState = 'pending' | 'signing' | 'verifying' | 'retired' | 'revoked';

/** The state of each key at `now` (pure). */
export function keyStates(keys: readonly KeyStatusRecord[], now: number): Map<string, KeyState> {
  const live = keys.filter((k) => k.revokedAt === undefined);
  const signing = signingKeyAt(live, now)?.kid;
  const published = new Set(publishedKeysAt(live, now).map((k) => k.kid));
  const out = new Map<string, KeyState>();
  for (const k of keys) {
    out.set(
      k.kid,
      k.revokedAt !== undefined
        ? 'revoked'
        : k.kid === signing
          ? 'signing'
          : !published.has(k.kid)
            ? 'retired'
            : k.activateAt > now
              ? 'pending'
              : 'verifying',
    );
  }
  return out;
}

const iso = (ms: number | undefined): string | null => (ms === undefined ? null : new Date(ms).toISOString());

function reasonOf(body: Record<string, unknown>): string | undefined {
  const reason = body.reason;
  if (reason === undefined || reason === null) return undefined;
  if (typeof reason !== 'string' || reason.length > MAX_REASON_LENGTH)
    throw invalidField('reason', `must be a string of at most ${MAX_REASON_LENGTH} characters`);
  return reason;
}

export function adminKeyRoutes(rt: OAuthRuntime): { method: 'get' | 'post'; pattern: string; handler: Handler }[] {
  const base = '/auth/admin/keys';
  return [
    {
      method: 'get',
      pattern: base,
      handler: async (ctx) => {
        await requireAdmin(rt, ctx, WHAT);
        const keys = await listKeyStatus(rt.pool);
        const states = keyStates(keys, rt.clock.now());
        return {
          body: {
            keys: keys.map((k) => ({
              kid: k.kid,
              alg: k.alg,
              state: states.get(k.kid),
              created_at: iso(k.createdAt),
              activate_at: iso(k.activateAt),
              retire_at: iso(k.retireAt),
              revoked_at: iso(k.revokedAt),
              revoked_reason: k.revokedReason ?? null,
            })),
          },
          headers: NO_STORE,
        };
      },
    },
    {
      method: 'post',
      pattern: `${base}/:kid/revoke`,
      handler: async (ctx) => {
        await requireAdmin(rt, ctx, WHAT);
        const reason = reasonOf(ctx.body.length === 0 ? {} : jsonBody(ctx));
        const result = await rt.keys.revoke(ctx.params[0]!, reason);
        if (!result) throw new PlatformError('not_found', { detail: 'no such signing key' });
        return {
          body: {
            kid: result.kid,
            revoked_at: iso(result.revokedAt),
            already_revoked: result.alreadyRevoked,
            successor: result.successor ? { kid: result.successor.kid, how: result.successor.how } : null,
          },
          headers: NO_STORE,
        };
      },
    },
  ];
}
