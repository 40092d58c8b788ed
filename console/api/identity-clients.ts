/**
 * Identity's OAuth client registry (identity/clients/admin-endpoint.ts, README "Clients"), as the
 * console calls it. A secret is only ever in the answer to a registration or a rotation: the
 * functions that return one say so in their type, and nothing here keeps it.
 */
import { seg, type ServiceClient } from './client.js';

export type ClientType = 'public' | 'confidential';

/** A client as the registry shows it (never a secret or its hash). */
export interface OAuthClientView {
  client_id: string;
  client_type: ClientType;
  name: string;
  redirect_uris: string[];
  grant_types: string[];
  /** Space-separated. */
  scope: string;
  role: string;
  token_endpoint_auth_method: string;
  /** Epoch seconds. */
  created_at: number;
  dpop_bound_access_tokens: boolean;
  tenant_id?: string;
  plan?: string;
}

/** The body of `POST /auth/admin/clients` (every field but `client_type` optional). */
export interface ClientRegistration {
  client_id?: string;
  client_type: ClientType;
  name?: string;
  redirect_uris?: string[];
  grant_types?: string[];
  scope?: string;
  role?: string;
  tenant_id?: string;
  plan?: string;
  dpop_bound_access_tokens?: boolean;
}

const BASE = '/auth/admin/clients';

export async function listClients(api: ServiceClient): Promise<OAuthClientView[]> {
  return (await api.get<{ clients: OAuthClientView[] }>(BASE)).data.clients;
}

/** The client, or undefined when there is none. */
export async function getClient(api: ServiceClient, id: string): Promise<OAuthClientView | undefined> {
  const r = await api.get<OAuthClientView>(`${BASE}/${seg(id)}`, { accept: [404] });
  return r.status === 404 ? undefined : r.data;
}

/** Registers a client; a confidential one's `client_secret` is in this answer and never again. */
export async function registerClient(api: ServiceClient, reg: ClientRegistration): Promise<OAuthClientView & { client_secret?: string }> {
  return (await api.post<OAuthClientView & { client_secret?: string }>(BASE, reg)).data;
}

/** A new secret for a confidential client (the old one stops working at once), shown this once. */
export async function rotateClientSecret(api: ServiceClient, id: string): Promise<{ client_id: string; client_secret: string }> {
  return (await api.post<{ client_id: string; client_secret: string }>(`${BASE}/${seg(id)}/secret`)).data;
}

export async function deleteClient(api: ServiceClient, id: string): Promise<void> {
  await api.del(`${BASE}/${seg(id)}`);
}
