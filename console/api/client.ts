/**
 * One small HTTP client per service, authenticated as the signed-in operator: every call carries
 * `Authorization: Bearer <the operator's access token>` (role `admin`), which each service verifies
 * itself against identity's keys. The browser never sees the token; the console is the only client
 * of these APIs in the browser's path, so no service needs CORS.
 *
 * Typed operations live beside this file, one module per service or feature (control-plane.ts,
 * notifier.ts, …), as functions over a {@link ServiceClient}.
 */
import { ApiError, problemOf } from './problem.js';

export interface CallOptions {
  query?: Record<string, string | number | boolean | undefined>;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as is, with `contentType`; an async iterable is streamed (a segment upload). */
  body?: string | Buffer | AsyncIterable<Uint8Array>;
  contentType?: string;
  /** Statuses answered without throwing (e.g. 404 for "not found" that a page shows as such). */
  accept?: readonly number[];
  /** This call's time limit instead of the client's (a streamed upload takes as long as the file). */
  timeoutMs?: number;
}

export interface ApiResponse<T> {
  status: number;
  headers: Headers;
  /** The parsed JSON body (undefined for an empty body). */
  data: T;
}

export interface ServiceClient {
  /** `control-plane`, `notifier`, `identity`: named in errors. */
  readonly service: string;
  call<T = unknown>(method: string, path: string, opts?: CallOptions): Promise<ApiResponse<T>>;
  get<T = unknown>(path: string, opts?: CallOptions): Promise<ApiResponse<T>>;
  post<T = unknown>(path: string, json?: unknown, opts?: CallOptions): Promise<ApiResponse<T>>;
  put<T = unknown>(path: string, json?: unknown, opts?: CallOptions): Promise<ApiResponse<T>>;
  del<T = unknown>(path: string, opts?: CallOptions): Promise<ApiResponse<T>>;
}

/** The services' admin APIs, each as the operator. */
export interface ConsoleApis {
  readonly controlPlane: ServiceClient;
  readonly notifier: ServiceClient;
  readonly identity: ServiceClient;
}

export interface ServiceClientOptions {
  service: string;
  baseUrl: string;
  /** The operator's current access token (refreshed by the session when it is about to expire). */
  accessToken: () => Promise<string>;
  timeoutMs: number;
}

/**
 * A path segment, percent-encoded (ids in paths come from forms, URLs and other APIs' answers).
 * `encodeURIComponent` leaves `.` alone, and URL parsing resolves a `.` or `..` segment (also
 * `%2e` spelled any way), so `/templates/../render` would reach `/render`; an empty segment makes
 * `/subjects//quota`, which the services' router reads as `/subjects/quota`. Such an id names
 * nothing: refused as not found before any request is made.
 */
export function seg(value: string): string {
  const s = encodeURIComponent(value);
  if (s === '' || /^(\.|%2e){1,2}$/i.test(s)) {
    throw new ApiError('console', { title: 'Not found', status: 404, code: 'not_found', detail: `"${value}" is not an id` });
  }
  return s;
}

export function serviceClient(opts: ServiceClientOptions): ServiceClient {
  const base = opts.baseUrl.replace(/\/+$/, '');
  async function call<T>(method: string, path: string, o: CallOptions = {}): Promise<ApiResponse<T>> {
    const url = new URL(base + path);
    for (const [k, v] of Object.entries(o.query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { authorization: `Bearer ${await opts.accessToken()}`, accept: 'application/json' };
    let body: string | Buffer | AsyncIterable<Uint8Array> | undefined;
    if (o.json !== undefined) {
      body = JSON.stringify(o.json);
      headers['content-type'] = 'application/json';
    } else if (o.body !== undefined) {
      body = o.body;
      headers['content-type'] = o.contentType ?? 'application/octet-stream';
    }
    let res: Response;
    try {
      const streamed = body !== undefined && typeof body !== 'string' && !Buffer.isBuffer(body);
      // A streamed body needs `duplex: 'half'` (undici); RequestInit's type predates it.
      const init = {
        method,
        headers,
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(o.timeoutMs ?? opts.timeoutMs),
        ...(streamed ? { duplex: 'half' } : {}),
      };
      res = await fetch(url, init as RequestInit);
    } catch (err) {
      const timedOut = err instanceof Error && err.name === 'TimeoutError';
      throw new ApiError(opts.service, {
        title: 'Service unavailable',
        status: 502,
        code: 'dependency_unavailable',
        detail: timedOut
          ? `${opts.service} did not answer within ${o.timeoutMs ?? opts.timeoutMs} ms`
          : `${opts.service} could not be reached`,
      });
    }
    const text = await res.text();
    const contentType = res.headers.get('content-type') ?? '';
    if (res.status >= 400 && !(o.accept ?? []).includes(res.status))
      throw new ApiError(opts.service, problemOf(res.status, contentType, text));
    let data: unknown = undefined;
    if (text !== '' && /json/i.test(contentType)) data = JSON.parse(text);
    return { status: res.status, headers: res.headers, data: data as T };
  }
  return {
    service: opts.service,
    call,
    get: (path, o) => call('GET', path, o),
    post: (path, json, o) => call('POST', path, { ...o, json }),
    put: (path, json, o) => call('PUT', path, { ...o, json }),
    del: (path, o) => call('DELETE', path, o),
  };
}
