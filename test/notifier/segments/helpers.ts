/**
 * Segment tests: a notifier core (HTTP API only, no workers) over its own database, uploads sent
 * over node:http with the body written chunk by chunk (so a test can hold an upload half-way), and
 * the body readers of the uploads it served.
 */
import { request, type ClientRequest } from 'node:http';
import type { BodyStream } from '../../../shared/body-stream.js';
import type { TestContext } from '../../harness/db.js';
import { startCore, type Core, type Json } from '../core/helpers.js';

export interface SegmentCore extends Core {
  /** The body readers of the uploads served, in order. */
  bodies: BodyStream[];
}

export async function startSegmentCore(t: TestContext, label: string, env: Record<string, string> = {}): Promise<SegmentCore> {
  const bodies: BodyStream[] = [];
  const core = await startCore(t, label, {
    env: { NOTIFIER_WORKERS: 'false', ...env },
    deps: { onSegmentUploadBody: (b) => bodies.push(b) },
  });
  return Object.assign(core, { bodies });
}

export interface Answer {
  status: number;
  body: Json;
}

/** An upload in progress: write the body piece by piece, then end it and read the answer. */
export interface OpenUpload {
  req: ClientRequest;
  /** Writes a piece, waiting for the socket to drain when it is full. */
  write(piece: string | Buffer): Promise<void>;
  /** Ends the body; resolves with the answer. */
  end(): Promise<Answer>;
  /** The answer, whenever it comes (before the body ends, for a refusal). */
  answer: Promise<Answer>;
}

export function openUpload(
  core: Core,
  id: string,
  contentType = 'application/x-ndjson',
  headers: Record<string, string> = core.admin,
): OpenUpload {
  const u = new URL(`${core.url}/api/v1/admin/segments/${encodeURIComponent(id)}/members`);
  const req = request(u, { method: 'PUT', headers: { 'content-type': contentType, ...headers } });
  const answer = new Promise<Answer>((resolve, reject) => {
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  answer.catch(() => {});
  return {
    req,
    answer,
    write: (piece) =>
      new Promise<void>((resolve, reject) => {
        const ok = req.write(piece, (err) => (err ? reject(err) : undefined));
        if (ok) resolve();
        else req.once('drain', resolve);
      }),
    end: () => {
      req.end();
      return answer;
    },
  };
}

/** Uploads a whole body in one request. */
export async function upload(
  core: Core,
  id: string,
  body: string,
  contentType = 'application/x-ndjson',
  headers?: Record<string, string>,
): Promise<Answer> {
  const u = openUpload(core, id, contentType, headers);
  await u.write(body);
  return u.end();
}

/** `n` ids `<prefix>000000`, `<prefix>000001`, … */
export function ids(n: number, prefix = 'user-', from = 0): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${String(from + i).padStart(6, '0')}`);
}

export const ndjson = (list: readonly string[]): string => list.map((id) => JSON.stringify(id) + '\n').join('');

/** The members of a stored version, in byte order. */
export async function storedMembers(core: Core, id: string, version: number): Promise<string[]> {
  const { rows } = await core.db.pool.query<{ user_id: string }>(
    'SELECT user_id FROM segment_members WHERE segment_id = $1 AND version = $2 ORDER BY user_id COLLATE "C"',
    [id, version],
  );
  return rows.map((r) => r.user_id);
}

export async function versionRow(
  core: Core,
  id: string,
  version: number,
): Promise<{ state: string; size: string; purged_at: Date | null } | undefined> {
  const { rows } = await core.db.pool.query<{ state: string; size: string; purged_at: Date | null }>(
    'SELECT state, size, purged_at FROM segment_versions WHERE segment_id = $1 AND version = $2',
    [id, version],
  );
  return rows[0];
}

/** Byte order, as the database compares user ids. */
export const byteOrder = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
