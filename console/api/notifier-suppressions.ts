/** The notifier's e-mail suppression list (notifier/feedback/suppression-routes.ts, README "Provider webhooks and suppression"). */
import { seg, type ServiceClient } from './client.js';

export type SuppressionReason = 'bounce' | 'complaint' | 'manual';

export interface Suppression {
  address: string;
  reason: SuppressionReason;
  detail: string | null;
  provider: string;
  delivery_id: string | null;
  /** Epoch seconds. */
  created_at: number;
}

const BASE = '/api/v1/admin/suppressions';

export async function listSuppressions(
  api: ServiceClient,
  q: { reason?: SuppressionReason; q?: string; cursor?: string; limit?: number } = {},
): Promise<{ suppressions: Suppression[]; next_cursor?: string }> {
  return (await api.get<{ suppressions: Suppression[]; next_cursor?: string }>(BASE, { query: q })).data;
}

export async function getSuppression(api: ServiceClient, address: string): Promise<Suppression | undefined> {
  const r = await api.get<Suppression>(`${BASE}/${seg(address)}`, { accept: [404] });
  return r.status === 404 ? undefined : r.data;
}

/** Puts an address on the list by hand; `created` false when it was already there (its entry unchanged). */
export async function addSuppression(
  api: ServiceClient,
  address: string,
  detail?: string,
): Promise<{ created: boolean; entry: Suppression }> {
  const r = await api.post<Suppression>(BASE, detail ? { address, detail } : { address });
  return { created: r.status === 201, entry: r.data };
}

/** True when it was listed (false: nothing to remove). */
export async function removeSuppression(api: ServiceClient, address: string): Promise<boolean> {
  const r = await api.del(`${BASE}/${seg(address)}`, { accept: [404] });
  return r.status !== 404;
}
