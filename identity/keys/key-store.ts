/**
 * The `signing_keys` table. SQL only; the schedule is key-schedule.ts, the step is rotation.ts.
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import type { PublicJwk } from './key-material.js';
import type { KeyRecord, SigningAlg } from './key-schedule.js';

type Db = Pool | PoolClient;

/** A stored key: its schedule, its public JWK and (for signing only) its private PEM. */
export interface StoredKey extends KeyRecord {
  readonly publicJwk: PublicJwk;
  readonly privatePkcs8: string;
}

interface Row {
  kid: string;
  alg: SigningAlg;
  public_jwk: PublicJwk;
  private_pkcs8: string;
  created_at: Date;
  activate_at: Date;
  retire_at: Date | null;
}

function fromRow(r: Row): StoredKey {
  return {
    kid: r.kid,
    alg: r.alg,
    publicJwk: r.public_jwk,
    privatePkcs8: r.private_pkcs8,
    createdAt: r.created_at.getTime(),
    activateAt: r.activate_at.getTime(),
    retireAt: r.retire_at ? r.retire_at.getTime() : undefined,
  };
}

export async function listKeys(db: Db): Promise<StoredKey[]> {
  const { rows } = await db.query<Row>(
    'SELECT kid, alg, public_jwk, private_pkcs8, created_at, activate_at, retire_at FROM signing_keys ORDER BY activate_at, created_at',
  );
  return rows.map(fromRow);
}

export async function insertKey(
  db: Db,
  k: { kid: string; alg: SigningAlg; publicJwk: PublicJwk; privatePkcs8: string; createdAt: number; activateAt: number },
): Promise<void> {
  await db.query(
    'INSERT INTO signing_keys (kid, alg, public_jwk, private_pkcs8, created_at, activate_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [k.kid, k.alg, JSON.stringify(k.publicJwk), k.privatePkcs8, new Date(k.createdAt), new Date(k.activateAt)],
  );
}

export async function setRetireAt(db: Db, kid: string, retireAt: number): Promise<void> {
  await db.query('UPDATE signing_keys SET retire_at = $2 WHERE kid = $1 AND retire_at IS NULL', [kid, new Date(retireAt)]);
}

/** Deletes a retired key, private material included. */
export async function deleteKey(db: Db, kid: string): Promise<void> {
  await db.query('DELETE FROM signing_keys WHERE kid = $1', [kid]);
}
