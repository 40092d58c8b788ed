/**
 * A keep-alive HTTP client for one provider base URL (undici `Pool`), with a hard per-call
 * deadline covering connect, headers and body. Each provider gets its own pool, so a provider that
 * hangs holds only its own connections: the others' sends never queue behind it.
 */
import { Pool } from 'undici';

/** A response that arrived in time (any status). */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Why no response arrived. */
export type HttpFailure = { failed: 'timeout' | 'connection_failed'; detail: string };

export interface ProviderHttpOptions {
  /** Base URL; a path after the origin (e.g. `/providers/secondary`) prefixes every request path. */
  baseUrl: string;
  /** Keep-alive connections to the provider. */
  connections: number;
  /** Connect timeout, ms (the per-call deadline still bounds the whole call). */
  connectTimeoutMs: number;
}

/** Provider answers we read are small JSON documents; anything larger is cut off. */
const MAX_ANSWER_BYTES = 256 * 1024;

export class ProviderHttp {
  readonly #pool: Pool;
  readonly #prefix: string;

  constructor(opts: ProviderHttpOptions) {
    const u = new URL(opts.baseUrl);
    this.#prefix = u.pathname.replace(/\/+$/, '');
    this.#pool = new Pool(u.origin, {
      connections: opts.connections,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      connect: { timeout: opts.connectTimeoutMs },
    });
  }

  /** Makes one request; never throws for network trouble (it returns an `HttpFailure`). */
  async request(req: {
    method: 'GET' | 'POST';
    path: string;
    headers: Record<string, string>;
    body?: string;
    timeoutMs: number;
  }): Promise<HttpAnswer | HttpFailure> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), req.timeoutMs);
    try {
      const res = await this.#pool.request({
        method: req.method,
        path: this.#prefix + req.path,
        headers: req.headers,
        body: req.body,
        signal: ac.signal,
        headersTimeout: req.timeoutMs,
        bodyTimeout: req.timeoutMs,
      });
      let size = 0;
      const chunks: Buffer[] = [];
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        if (size < MAX_ANSWER_BYTES) chunks.push(chunk);
        size += chunk.length;
      }
      return { status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') };
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (
        ac.signal.aborted ||
        code === 'UND_ERR_HEADERS_TIMEOUT' ||
        code === 'UND_ERR_BODY_TIMEOUT' ||
        code === 'UND_ERR_CONNECT_TIMEOUT'
      ) {
        return { failed: 'timeout', detail: `no answer within ${req.timeoutMs} ms` };
      }
      return { failed: 'connection_failed', detail: err instanceof Error ? `${String(code ?? err.name)}: ${err.message}` : String(err) };
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.#pool.destroy();
  }
}

export const isFailure = (r: HttpAnswer | HttpFailure): r is HttpFailure => 'failed' in r;

/** Parses a JSON answer; `undefined` when it is not JSON. */
export function jsonOf(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
