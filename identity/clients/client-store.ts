/**
 * The `oauth_clients` table, and `registerClient` / `rotateClientSecret`, which make the secret
 * on the server and return it once.
 */
import type { Pool, PoolClient } from '../../shared/db.js';
import { invalidField } from '../../shared/errors.js';
import type { ClientRegistration, ClientType, GrantType, OAuthClient } from './client.js';
import { generateClientSecret, hashClientSecret } from './client-secret.js';

type Db = Pool | PoolClient;

interface Row {
  client_id: string;
  client_type: ClientType;
  secret_sha256: Buffer | null;
  name: string;
  redirect_uris: string[];
  grant_types: GrantType[];
  scopes: string[];
  role: string;
  tenant_id: string | null;
  plan: string | null;
  created_at: Date;
  dpop_bound_access_tokens: boolean;
}

const COLUMNS =
  'client_id, client_type, secret_sha256, name, redirect_uris, grant_types, scopes, role, tenant_id, plan, created_at, dpop_bound_access_tokens';

function fromRow(r: Row): OAuthClient {
  return Object.freeze({
    clientId: r.client_id,
    type: r.client_type,
    name: r.name,
    redirectUris: Object.freeze([...r.redirect_uris]),
    grantTypes: Object.freeze([...r.grant_types]),
    scopes: Object.freeze([...r.scopes]),
    role: r.role,
    tenantId: r.tenant_id ?? undefined,
    plan: r.plan ?? undefined,
    secretSha256: r.secret_sha256 ?? undefined,
    createdAt: r.created_at.getTime(),
    dpopBoundAccessTokens: r.dpop_bound_access_tokens,
  });
}

export async function getClient(db: Db, clientId: string): Promise<OAuthClient | undefined> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM oauth_clients WHERE client_id = $1`, [clientId]);
  return rows[0] ? fromRow(rows[0]) : undefined;
}

export async function listClients(db: Db): Promise<OAuthClient[]> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM oauth_clients ORDER BY client_id`);
  return rows.map(fromRow);
}

export interface RegisteredClient {
  client: OAuthClient;
  /** The secret of a confidential client, in clear: shown once, never stored. */
  clientSecret: string | undefined;
}

/**
 * Stores a validated registration (see `validateRegistration`). A confidential client gets a new
 * server-generated secret, returned here and nowhere else. A taken `client_id` is `invalid_field`.
 */
export async function registerClient(db: Db, reg: ClientRegistration, nowMs: number): Promise<RegisteredClient> {
  const clientSecret = reg.type === 'confidential' ? generateClientSecret() : undefined;
  const { rows } = await db.query<Row>(
    `INSERT INTO oauth_clients (client_id, client_type, secret_sha256, name, redirect_uris, grant_types, scopes, role, tenant_id, plan, created_at,
                                dpop_bound_access_tokens)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ON CONFLICT (client_id) DO NOTHING
     RETURNING ${COLUMNS}`,
    [
      reg.clientId,
      reg.type,
      clientSecret === undefined ? null : hashClientSecret(clientSecret),
      reg.name,
      reg.redirectUris,
      reg.grantTypes,
      reg.scopes,
      reg.role,
      reg.tenantId ?? null,
      reg.plan ?? null,
      new Date(nowMs),
      reg.dpopBoundAccessTokens,
    ],
  );
  if (!rows[0]) throw invalidField('client_id', 'is already registered');
  return { client: fromRow(rows[0]), clientSecret };
}

/** Replaces a confidential client's secret; the old one stops working at once. Undefined: no such client. */
export async function rotateClientSecret(db: Db, clientId: string, nowMs: number): Promise<string | undefined> {
  const secret = generateClientSecret();
  const { rowCount } = await db.query(
    `UPDATE oauth_clients SET secret_sha256 = $2, secret_rotated_at = $3 WHERE client_id = $1 AND client_type = 'confidential'`,
    [clientId, hashClientSecret(secret), new Date(nowMs)],
  );
  return rowCount ? secret : undefined;
}

/** Removes a client. Its grants stay recorded but can no longer be used (the client is unknown). */
export async function deleteClient(db: Db, clientId: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM oauth_clients WHERE client_id = $1', [clientId]);
  return (rowCount ?? 0) > 0;
}
