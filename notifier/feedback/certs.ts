/**
 * The SNS signing certificates: which URLs may be fetched, and a cache by URL.
 *
 * A `SigningCertURL` is fetched only when it passes {@link certUrlProblem}: `https` to a host that
 * matches the configured pattern (NOTIFIER_SNS_CERT_HOSTS, by default the real
 * `sns.<region>.amazonaws.com`), or plain `http` to a `host:port` listed in
 * NOTIFIER_SNS_CERT_HTTP_HOSTS (empty by default; tests and `npm start` list the sandbox there,
 * which serves its certificate over http), and a path ending in `.pem`. Anything else is refused
 * without a request, so a forged envelope cannot make the notifier call an address of its
 * choosing. The TLS connection to an allowed host is what vouches for the certificate.
 *
 * Certificates rotate, so none is pinned: each URL is fetched once and kept for
 * NOTIFIER_SNS_CERT_TTL (a new URL is a new certificate); a certificate outside its validity
 * dates is refused; concurrent requests for one URL share one fetch; a failed fetch is not cached.
 */
import { X509Certificate, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../shared/clock.js';

export interface CertPolicy {
  /** Hostnames allowed over https. */
  hostPattern: RegExp;
  /** `host:port` (or host for port 80) allowed over plain http. */
  httpHosts: readonly string[];
}

/**
 * Why a URL on the provider's side (a certificate, a SubscribeURL) is refused without a request;
 * undefined when it may be fetched: https to an allowed host, or http to a listed host:port.
 */
export function providerUrlProblem(raw: string, policy: CertPolicy): string | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'not a URL';
  }
  if (u.username !== '' || u.password !== '') return 'the URL carries credentials';
  if (u.protocol === 'https:') {
    return policy.hostPattern.test(u.hostname) ? undefined : `host ${u.hostname} is not an allowed SNS host`;
  }
  if (u.protocol === 'http:') {
    return policy.httpHosts.includes(u.host) ? undefined : `plain http to ${u.host} is not allowed`;
  }
  return `scheme ${u.protocol} is not allowed`;
}

/** Why a certificate URL is refused without a fetch; undefined when it may be fetched. */
export function certUrlProblem(raw: string, policy: CertPolicy): string | undefined {
  const problem = providerUrlProblem(raw, policy);
  if (problem !== undefined) return `SigningCertURL: ${problem}`;
  return new URL(raw).pathname.endsWith('.pem') ? undefined : 'SigningCertURL does not name a .pem file';
}

export type CertFetch = (url: string) => Promise<{ status: number; body: Buffer }>;

/** GETs a certificate: at most `maxBytes`, within `timeoutMs`, no redirects followed. */
export function httpCertFetch(timeoutMs: number, maxBytes = 64 * 1024): CertFetch {
  return async (url) => {
    const r = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    const chunks: Buffer[] = [];
    let n = 0;
    if (r.body) {
      for await (const c of r.body as AsyncIterable<Uint8Array>) {
        n += c.length;
        if (n > maxBytes) throw new Error(`certificate larger than ${maxBytes} bytes`);
        chunks.push(Buffer.from(c));
      }
    }
    return { status: r.status, body: Buffer.concat(chunks) };
  };
}

export type CertResult = { ok: true; key: KeyObject } | { ok: false; why: 'not_allowed' | 'unusable' | 'unavailable'; detail: string };

export interface CertCacheOptions {
  policy: CertPolicy;
  ttlMs: number;
  clock: Clock;
  fetch: CertFetch;
  /** URLs kept at most (default 64). */
  maxEntries?: number;
}

export class CertCache {
  readonly #o: CertCacheOptions;
  readonly #cache: LRUCache<string, { key: KeyObject; until: number }>;
  readonly #inflight = new Map<string, Promise<CertResult>>();
  /** Fetches made (tests count them). */
  fetches = 0;

  constructor(o: CertCacheOptions) {
    this.#o = o;
    this.#cache = new LRUCache({ max: o.maxEntries ?? 64 });
  }

  /** The public key of the certificate at `url`, from the cache or fetched. */
  async get(url: string): Promise<CertResult> {
    const refused = certUrlProblem(url, this.#o.policy);
    if (refused !== undefined) return { ok: false, why: 'not_allowed', detail: refused };
    const now = this.#o.clock.now();
    const hit = this.#cache.get(url);
    if (hit && hit.until > now) return { ok: true, key: hit.key };
    let p = this.#inflight.get(url);
    if (!p) {
      p = this.#load(url).finally(() => this.#inflight.delete(url));
      this.#inflight.set(url, p);
    }
    return p;
  }

  async #load(url: string): Promise<CertResult> {
    this.fetches++;
    let got: { status: number; body: Buffer };
    try {
      got = await this.#o.fetch(url);
    } catch (err) {
      return {
        ok: false,
        why: 'unavailable',
        detail: `fetching the certificate failed: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
    if (got.status !== 200) return { ok: false, why: 'unavailable', detail: `the certificate URL answered ${got.status}` };
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(got.body);
    } catch {
      return { ok: false, why: 'unusable', detail: 'the certificate does not parse' };
    }
    const now = this.#o.clock.now();
    if (Date.parse(cert.validFrom) > now || Date.parse(cert.validTo) < now) {
      return { ok: false, why: 'unusable', detail: 'the certificate is outside its validity dates' };
    }
    const key = cert.publicKey;
    this.#cache.set(url, { key, until: now + this.#o.ttlMs });
    return { ok: true, key };
  }
}
