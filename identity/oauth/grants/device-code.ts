/**
 * `grant_type=urn:ietf:params:oauth:grant-type:device_code` (RFC 8628 §3.4–3.5): the device polls
 * until the person approves on another device. The row is locked per poll, so an approved code is
 * exchanged exactly once.
 */
import { withTransaction } from '../../../shared/db.js';
import type { OAuthClient } from '../../clients/client.js';
import { createGrant, type Grant } from '../../tokens/grant-store.js';
import { looksLikeOpaqueToken } from '../../tokens/opaque.js';
import { decidePoll } from '../device-flow.js';
import { lockDeviceCode, markDeviceConsumed, recordPoll } from '../device-store.js';
import { OAuthError } from '../oauth-error.js';
import { required, type Params } from '../params.js';
import type { OAuthRuntime } from '../runtime.js';
import { familyBinding, type GrantContext } from './grant-context.js';
import { userTokenResponse } from './user-tokens.js';

type Poll = { ok: true; grant: Grant; refreshToken: string | undefined } | { ok: false; error: OAuthError };

export async function deviceCodeGrant(rt: OAuthRuntime, client: OAuthClient, p: Params, g: GrantContext): Promise<Record<string, unknown>> {
  const deviceCode = required(p, 'device_code');
  if (!looksLikeOpaqueToken(deviceCode)) throw new OAuthError('invalid_grant', 'the device code is invalid');
  await rt.tokens.ready();
  const now = rt.clock.now();
  const r = await withTransaction(rt.pool, async (db): Promise<Poll> => {
    const d = await lockDeviceCode(db, deviceCode);
    const decision = decidePoll(d, client.clientId, now);
    switch (decision.kind) {
      case 'error':
        return { ok: false, error: new OAuthError(decision.error, decision.description) };
      case 'slow_down':
        await recordPoll(db, deviceCode, now, decision.intervalS);
        return { ok: false, error: new OAuthError('slow_down', `poll at most every ${decision.intervalS} s`) };
      case 'pending':
        await recordPoll(db, deviceCode, now, d!.intervalS);
        return { ok: false, error: new OAuthError('authorization_pending', 'the user has not approved the request yet') };
      case 'issue': {
        const { grant, refreshToken } = await createGrant(db, {
          userId: d!.userId!,
          clientId: client.clientId,
          scope: d!.scope,
          authTimeMs: d!.authTime ?? now,
          nowMs: now,
          refreshTtlMs: client.grantTypes.includes('refresh_token') ? rt.settings.refreshTokenTtlMs : undefined,
          dpopJkt: familyBinding(client, g),
        });
        await markDeviceConsumed(db, deviceCode, grant.grantId);
        return { ok: true, grant, refreshToken };
      }
    }
  });
  if (!r.ok) throw r.error;
  return userTokenResponse(rt, { grant: r.grant, client, refreshToken: r.refreshToken, jkt: g.dpop?.jkt });
}
