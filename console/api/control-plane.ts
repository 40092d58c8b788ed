/**
 * The control plane's internal HTTP API, as the quotas pages use it (README, "Changing a quota";
 * limiter/control-plane/http-api.ts): list records by subject kind or prefix, read, replace and
 * delete one by subject id, and the sidecars with the version each acked.
 */
import { createHash } from 'node:crypto';
import { seg, type ServiceClient } from './client.js';

export type Algorithm = 'token_bucket' | 'sliding_window' | 'leaky_bucket' | 'fixed_window';
export type Unit = 'second' | 'minute' | 'hour' | 'day';
export type SubjectKind = 'key' | 'user' | 'tenant' | 'plan';

export const ALGORITHMS: readonly Algorithm[] = ['token_bucket', 'sliding_window', 'leaky_bucket', 'fixed_window'];
export const UNITS: readonly Unit[] = ['second', 'minute', 'hour', 'day'];
export const SUBJECT_KINDS: readonly SubjectKind[] = ['key', 'user', 'tenant', 'plan'];

export interface RouteRule {
  path_prefix?: string;
  [k: string]: unknown;
}

/** quota.v1.Quota as JSON (fields at their default may be left out). */
export interface Quota {
  subject_id: string;
  algorithm?: Algorithm;
  rate?: number;
  burst?: number;
  interval_ms?: number;
  unit?: Unit;
  cost?: number;
  fail_mode?: 'open' | 'closed';
  shadow?: boolean;
  plan?: string;
  version?: number | string;
  updated_at?: number;
  routes?: RouteRule[];
  accuracy?: 'exact' | 'approximate';
}

/** The PUT body: a whole record without what the control plane assigns. */
export type QuotaInput = Omit<Quota, 'subject_id' | 'version' | 'updated_at'>;

export interface PutResult {
  quota: Quota;
  version: number | string;
  acked_sidecar_ids?: string[];
  lagging_sidecar_ids?: string[];
}

export interface SidecarStatus {
  sidecar_id: string;
  acked_version: number | string;
  local: boolean;
  lagging: boolean;
}

/** `key:` and the SHA-256 of a raw API key, as the control plane stores it (the raw key goes nowhere). */
export function apiKeySubject(rawKey: string): string {
  return `key:${createHash('sha256').update(rawKey, 'utf8').digest('hex')}`;
}

export async function listQuotas(
  c: ServiceClient,
  q: { subjectKind?: SubjectKind; prefix?: string; cursor?: string; limit?: number },
): Promise<{ quotas: Quota[]; next_cursor: string | null }> {
  const r = await c.get<{ quotas: Quota[]; next_cursor: string | null }>('/internal/quotas', {
    query: { subject_kind: q.subjectKind, prefix: q.prefix, cursor: q.cursor, limit: q.limit },
  });
  return r.data;
}

/** The record of a subject, or undefined when it has none. */
export async function getQuota(c: ServiceClient, subjectId: string): Promise<Quota | undefined> {
  const r = await c.get<{ quota: Quota }>(`/internal/subjects/${seg(subjectId)}/quota`, { accept: [404] });
  return r.status === 404 ? undefined : r.data.quota;
}

export async function putQuota(c: ServiceClient, subjectId: string, input: QuotaInput): Promise<PutResult & { created: boolean }> {
  const r = await c.put<PutResult>(`/internal/subjects/${seg(subjectId)}/quota`, input);
  return { ...r.data, created: r.status === 201 };
}

/** Deletes a subject's record; false when it had none. */
export async function deleteQuota(c: ServiceClient, subjectId: string): Promise<boolean> {
  const r = await c.del(`/internal/subjects/${seg(subjectId)}/quota`, { accept: [404] });
  return r.status === 204;
}

export async function listSidecars(c: ServiceClient): Promise<{ version: number | string; sidecars: SidecarStatus[] }> {
  return (await c.get<{ version: number | string; sidecars: SidecarStatus[] }>('/internal/sidecars')).data;
}
