/**
 * The notifier's segment operator API (notifier/segments/routes.ts, README "Segments"), as the
 * console calls it. Uploads are streamed: the console passes the file's bytes on as they arrive
 * from the browser and never holds the whole list.
 */
import { seg, type ServiceClient } from './client.js';

export interface SegmentRule {
  locale?: string;
  timezone?: string;
  tags?: string[];
}

export interface SegmentView {
  id: string;
  kind: 'list' | 'rule';
  version: number;
  /** null for a rule segment in a list (counted only when the segment is read). */
  size: number | null;
  rule?: SegmentRule;
  updated_at: string;
  updated_by: string | null;
}

export interface SegmentVersion {
  version: number;
  state: 'uploading' | 'live' | 'retired' | 'abandoned';
  size: number;
  created_by: string | null;
  created_at: string;
  completed_at: string | null;
  purged: boolean;
}

const BASE = '/api/v1/admin/segments';

export async function listSegments(
  api: ServiceClient,
  q: { cursor?: string; limit?: number } = {},
): Promise<{ segments: SegmentView[]; next_cursor?: string }> {
  return (await api.get<{ segments: SegmentView[]; next_cursor?: string }>(BASE, { query: q })).data;
}

/** The segment (a rule segment's size counted now), or undefined. */
export async function getSegment(api: ServiceClient, id: string): Promise<SegmentView | undefined> {
  const r = await api.get<SegmentView>(`${BASE}/${seg(id)}`, { accept: [404] });
  return r.status === 404 ? undefined : r.data;
}

export async function listVersions(api: ServiceClient, id: string, limit = 50): Promise<SegmentVersion[]> {
  return (await api.get<{ versions: SegmentVersion[] }>(`${BASE}/${seg(id)}/versions`, { query: { limit } })).data.versions;
}

/** Creates or changes a rule segment; `created` for a new one. */
export async function putRuleSegment(
  api: ServiceClient,
  id: string,
  rule: SegmentRule,
): Promise<{ created: boolean; segment: SegmentView }> {
  const r = await api.put<SegmentView>(`${BASE}/${seg(id)}`, { kind: 'rule', rule });
  return { created: r.status === 201, segment: r.data };
}

export async function deleteSegment(api: ServiceClient, id: string): Promise<void> {
  await api.del(`${BASE}/${seg(id)}`);
}

export type UploadFormat = 'ndjson' | 'csv';

export const UPLOAD_CONTENT_TYPES: Readonly<Record<UploadFormat, string>> = {
  ndjson: 'application/x-ndjson',
  csv: 'text/csv',
};

/**
 * How long an upload may take: as long as the file does to arrive and be stored (a million ids, 40
 * MB, take about 20 s at the notifier), not the console's usual wait for one answer.
 */
export const UPLOAD_TIMEOUT_MS = 10 * 60_000;

/** A new version of a list segment's members, streamed from `body`; `created` for a new segment. */
export async function uploadMembers(
  api: ServiceClient,
  id: string,
  format: UploadFormat,
  body: AsyncIterable<Uint8Array>,
): Promise<{ created: boolean; segment: SegmentView }> {
  const r = await api.call<SegmentView>('PUT', `${BASE}/${seg(id)}/members`, {
    body,
    contentType: UPLOAD_CONTENT_TYPES[format],
    timeoutMs: UPLOAD_TIMEOUT_MS,
  });
  return { created: r.status === 201, segment: r.data };
}
