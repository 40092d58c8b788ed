/**
 * Security alerts: a replayed refresh token (`RefreshTokenReuseDetected`, proto identity.v1) or a
 * replayed authorization code (`AuthorizationCodeReuseDetected`, same fields). Each is appended to
 * `security_events` in the transaction that revokes the grant, logged as a warning (ids only, no
 * token), and handed to an optional hook after commit (the User aggregate records
 * `RefreshTokenReuseDetected` in its event stream through it).
 */
import { create } from '@bufbuild/protobuf';
import { RefreshTokenReuseDetectedSchema } from '../../proto/gen/identity/v1/identity_pb.js';
import type { Pool, PoolClient } from '../../shared/db.js';
import { toJson } from '../../shared/proto-json.js';

export type SecurityEventType = 'RefreshTokenReuseDetected' | 'AuthorizationCodeReuseDetected';

export interface SecurityAlert {
  readonly type: SecurityEventType;
  readonly userId: string;
  readonly clientId: string;
  /** The revoked grant (the refresh-token family). */
  readonly familyId: string;
  /** Epoch ms. */
  readonly at: number;
}

/** The alert's JSON payload: the proto message's JSON (snake_case, `ts` in epoch seconds). */
export function alertPayload(a: SecurityAlert): Record<string, unknown> {
  return toJson(
    RefreshTokenReuseDetectedSchema,
    create(RefreshTokenReuseDetectedSchema, { userId: a.userId, clientId: a.clientId, familyId: a.familyId, ts: a.at / 1000 }),
  );
}

export async function recordSecurityEvent(db: Pool | PoolClient, a: SecurityAlert): Promise<void> {
  await db.query(
    `INSERT INTO security_events (event_type, user_id, client_id, grant_id, data, recorded_at) VALUES ($1, $2, $3, $4, $5, $6)`,
    [a.type, a.userId, a.clientId, a.familyId, JSON.stringify(alertPayload(a)), new Date(a.at)],
  );
}

export interface StoredSecurityEvent {
  id: number;
  eventType: SecurityEventType;
  userId: string | null;
  clientId: string | null;
  grantId: string | null;
  data: Record<string, unknown>;
  recordedAt: number;
}

/** The recorded alerts, oldest first (optionally of one user). */
export async function listSecurityEvents(db: Pool | PoolClient, userId?: string): Promise<StoredSecurityEvent[]> {
  const { rows } = await db.query<{
    id: string;
    event_type: SecurityEventType;
    user_id: string | null;
    client_id: string | null;
    grant_id: string | null;
    data: Record<string, unknown>;
    recorded_at: Date;
  }>(
    `SELECT id, event_type, user_id, client_id, grant_id, data, recorded_at FROM security_events
      WHERE $1::text IS NULL OR user_id = $1 ORDER BY id`,
    [userId ?? null],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    eventType: r.event_type,
    userId: r.user_id,
    clientId: r.client_id,
    grantId: r.grant_id,
    data: r.data,
    recordedAt: r.recorded_at.getTime(),
  }));
}
