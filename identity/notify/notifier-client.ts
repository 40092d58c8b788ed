/**
 * The notifier's API as identity's relay calls it: through the sidecar (IDENTITY_NOTIFY_URL, its
 * `/api/v1` routes) as a service caller, or straight at the notifier. Every call answers an
 * {@link Answer} or throws for a call that got no answer; it never retries by itself.
 */
import { Agent, request } from 'undici';
import type { Clock } from '../../shared/clock.js';
import { parseRetryAfter, type Answer } from './policy.js';
import type { NotificationRequest } from './messages.js';

/** Headers that make the caller a service at the notifier (an API key, a bearer token, …). */
export type ServiceAuth = () => Promise<Record<string, string>>;

export interface NotifierClientOptions {
  /** The sidecar's (or notifier's) origin. */
  baseUrl: string;
  auth: ServiceAuth;
  /** Per request, ms. */
  timeoutMs: number;
  clock: Clock;
}

/** The profile fields identity keeps and the ones it must carry over (the PUT replaces the whole profile). */
export interface RecipientProfile {
  email?: string;
  phone?: string;
  locale?: string;
  timezone?: string;
}

export interface Reply extends Answer {
  readonly body: unknown;
}

export class NotifierClient {
  private readonly agent: Agent;
  private readonly base: string;

  constructor(private readonly opts: NotifierClientOptions) {
    this.base = opts.baseUrl.replace(/\/$/, '');
    this.agent = new Agent({ connections: 16, keepAliveTimeout: 10_000 });
  }

  private async call(method: 'GET' | 'PUT' | 'POST', path: string, body?: unknown): Promise<Reply> {
    const headers: Record<string, string> = { accept: 'application/json', ...(await this.opts.auth()) };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await request(this.base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher: this.agent,
      signal: AbortSignal.timeout(this.opts.timeoutMs),
    });
    const text = await res.body.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const code = (parsed as { code?: unknown } | undefined)?.code;
    const detail = (parsed as { detail?: unknown } | undefined)?.detail;
    const retryAfter = res.headers['retry-after'];
    return {
      status: res.statusCode,
      code: typeof code === 'string' ? code : undefined,
      detail: res.statusCode >= 400 && typeof detail === 'string' ? detail : undefined,
      retryAfterMs: parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, this.opts.clock.now()),
      body: parsed,
    };
  }

  /** `POST /api/v1/notifications`: 202 accepted (or replayed for the same idempotency key). */
  notify(req: NotificationRequest): Promise<Reply> {
    return this.call('POST', '/api/v1/notifications', req);
  }

  /** `GET /api/v1/users/{id}/profile`: 200 with the profile, 404 without one. */
  getProfile(userId: string): Promise<Reply> {
    return this.call('GET', `/api/v1/users/${encodeURIComponent(userId)}/profile`);
  }

  /** `PUT /api/v1/users/{id}/profile`: replaces the whole profile. */
  putProfile(userId: string, profile: RecipientProfile): Promise<Reply> {
    return this.call('PUT', `/api/v1/users/${encodeURIComponent(userId)}/profile`, profile);
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** The fields of a stored profile the PUT must carry over, read from a GET answer. */
export function keptFields(stored: unknown): RecipientProfile {
  const out: RecipientProfile = {};
  if (stored && typeof stored === 'object') {
    const s = stored as Record<string, unknown>;
    for (const k of ['phone', 'locale', 'timezone'] as const) if (typeof s[k] === 'string' && s[k] !== '') out[k] = s[k];
  }
  return out;
}
