/**
 * Device authorization (RFC 8628) codes (`device_codes`): SQL only. The device code is stored as
 * its SHA-256; the user code in its normal form (upper-case, no dash).
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import { sha256 } from '../tokens/opaque.js';

export type DeviceStatus = 'pending' | 'approved' | 'denied' | 'consumed';

export interface DeviceRecord {
  readonly clientId: string;
  readonly scope: string;
  readonly status: DeviceStatus;
  readonly intervalS: number;
  readonly expiresAt: number;
  readonly lastPolledAt: number | undefined;
  readonly userId: string | undefined;
  readonly authTime: number | undefined;
}

interface Row {
  client_id: string;
  scope: string;
  status: DeviceStatus;
  interval_s: number;
  expires_at: Date;
  last_polled_at: Date | null;
  user_id: string | null;
  auth_time: Date | null;
}

const COLUMNS = 'client_id, scope, status, interval_s, expires_at, last_polled_at, user_id, auth_time';

function fromRow(r: Row): DeviceRecord {
  return {
    clientId: r.client_id,
    scope: r.scope,
    status: r.status,
    intervalS: r.interval_s,
    expiresAt: r.expires_at.getTime(),
    lastPolledAt: r.last_polled_at ? r.last_polled_at.getTime() : undefined,
    userId: r.user_id ?? undefined,
    authTime: r.auth_time ? r.auth_time.getTime() : undefined,
  };
}

/** Inserts a device authorization; false when the user code is taken (the caller draws another). */
export async function insertDeviceCode(
  db: Pool | PoolClient,
  d: { deviceCode: string; userCode: string; clientId: string; scope: string; intervalS: number; nowMs: number; ttlMs: number },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO device_codes (device_code_sha256, user_code, client_id, scope, interval_s, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (user_code) DO NOTHING`,
    [sha256(d.deviceCode), d.userCode, d.clientId, d.scope, d.intervalS, new Date(d.nowMs), new Date(d.nowMs + d.ttlMs)],
  );
  return (rowCount ?? 0) > 0;
}

export async function lockDeviceCode(db: PoolClient, deviceCode: string): Promise<DeviceRecord | undefined> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM device_codes WHERE device_code_sha256 = $1 FOR UPDATE`, [
    sha256(deviceCode),
  ]);
  return rows[0] ? fromRow(rows[0]) : undefined;
}

export async function findByUserCode(db: Pool | PoolClient, userCode: string): Promise<DeviceRecord | undefined> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM device_codes WHERE user_code = $1`, [userCode]);
  return rows[0] ? fromRow(rows[0]) : undefined;
}

/** Records a poll; `intervalS` is the (possibly raised) interval from now on. */
export async function recordPoll(db: PoolClient, deviceCode: string, nowMs: number, intervalS: number): Promise<void> {
  await db.query('UPDATE device_codes SET last_polled_at = $2, interval_s = $3 WHERE device_code_sha256 = $1', [
    sha256(deviceCode),
    new Date(nowMs),
    intervalS,
  ]);
}

/** Approves or denies a pending, unexpired user code. False when there is none. */
export async function decideUserCode(
  db: Pool | PoolClient,
  userCode: string,
  decision: { approve: true; userId: string; authTimeMs: number } | { approve: false },
  nowMs: number,
): Promise<boolean> {
  const { rowCount } = decision.approve
    ? await db.query(
        `UPDATE device_codes SET status = 'approved', user_id = $2, auth_time = $3
          WHERE user_code = $1 AND status = 'pending' AND expires_at > $4`,
        [userCode, decision.userId, new Date(decision.authTimeMs), new Date(nowMs)],
      )
    : await db.query(`UPDATE device_codes SET status = 'denied' WHERE user_code = $1 AND status = 'pending' AND expires_at > $2`, [
        userCode,
        new Date(nowMs),
      ]);
  return (rowCount ?? 0) > 0;
}

export async function markDeviceConsumed(db: PoolClient, deviceCode: string, grantId: string): Promise<void> {
  await db.query(`UPDATE device_codes SET status = 'consumed', grant_id = $2 WHERE device_code_sha256 = $1`, [sha256(deviceCode), grantId]);
}
