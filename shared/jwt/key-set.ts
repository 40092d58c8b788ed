/**
 * The verifier's set of signing keys: static (a JWKS given in config) or remote (identity's
 * `/.well-known/jwks.json`), cached by kid.
 *
 * Remote fetching follows three rules:
 * - **Single flight.** At most one fetch is in progress; everyone who needs it awaits the same one.
 * - **Cooldown.** A fetch starts at most once per `cooldownMs`, whatever triggered it, so a flood
 *   of tokens with random kids costs one fetch per window, not one per token.
 * - **Stale is better than nothing.** The set is refreshed in the background once it is older
 *   than `maxAgeMs` (without delaying the verification that noticed), and a failed fetch keeps the
 *   last good set: when identity is down, tokens signed by known keys still verify. A successful
 *   fetch replaces the set whole, which is how a retired key stops verifying.
 *
 * No timers: every fetch is triggered by a caller, so there is nothing to leak or to stop beyond
 * aborting a fetch in flight.
 */
import type { Logger } from '../log.js';
import { importPinnedKey, type JwksDocument, type PinnedKey } from './keys.js';

export interface KeySetOptions {
  jwksUrl?: URL;
  keys?: JwksDocument;
  cooldownMs: number;
  maxAgeMs: number;
  fetchTimeoutMs: number;
  now: () => number;
  log?: Logger;
}

/** A JWKS document larger than this is refused; real ones are a few kilobytes. */
export const MAX_JWKS_BYTES = 256 * 1024;
/** More keys than this in one set is a misconfiguration, not a rotation. */
export const MAX_JWKS_KEYS = 64;

export interface KeySetStats {
  keyIds: string[];
  /** Clock time (epoch ms) of the last successful load, if any. */
  loadedAtMs: number | undefined;
  fetches: number;
  fetchFailures: number;
}

export class KeySet {
  private keys = new Map<string, PinnedKey>();
  private loadedAt: number | undefined;
  private lastAttemptAt = Number.NEGATIVE_INFINITY;
  private inflight: Promise<boolean> | undefined;
  private lastError: Error | undefined;
  private fetches = 0;
  private fetchFailures = 0;
  private closed = false;
  private readonly abort = new AbortController();
  private readonly initial: Promise<void>;

  constructor(private readonly opts: KeySetOptions) {
    if (opts.keys) {
      this.initial = this.install(opts.keys, 'static').then((ok) => {
        if (!ok) throw new Error('the static JWKS has no usable keys');
      });
    } else {
      this.initial = this.refresh().then((ok) => {
        if (!ok) throw this.lastError ?? new Error('JWKS fetch failed');
      });
    }
    // ready() reports the first load's failure; nobody else has to observe it.
    this.initial.catch(() => undefined);
  }

  get remote(): boolean {
    return this.opts.jwksUrl !== undefined;
  }

  get hasKeys(): boolean {
    return this.keys.size > 0;
  }

  get(kid: string): PinnedKey | undefined {
    return this.keys.get(kid);
  }

  /**
   * Resolves once a set has been loaded. While none has: awaits the fetch in flight, or starts one
   * if the cooldown allows, else rejects with the last failure.
   */
  async ready(): Promise<void> {
    if (this.keys.size > 0) return;
    if (!this.remote) return this.initial;
    if (await this.refresh()) return;
    if (this.keys.size > 0) return;
    throw this.lastError ?? new Error('no signing keys loaded');
  }

  /** Called on every verification: starts a background refresh once the set is older than max age. */
  refreshIfStale(now: number): void {
    if (!this.remote || this.inflight || this.closed) return;
    if (this.loadedAt !== undefined && now - this.loadedAt < this.opts.maxAgeMs) return;
    if (now - this.lastAttemptAt < this.opts.cooldownMs) return;
    void this.refresh();
  }

  /**
   * For a kid not in the set: joins or starts a refetch (subject to the cooldown), then looks the
   * kid up again. Undefined means still unknown.
   */
  async lookupAfterRefresh(kid: string): Promise<PinnedKey | undefined> {
    // A static set imports asynchronously: a verification that arrives first waits for it.
    if (this.remote) await this.refresh();
    else await this.initial.catch(() => undefined);
    return this.keys.get(kid);
  }

  /** Single-flight, cooled-down fetch. Resolves true when a fetch ran and installed a set. */
  refresh(): Promise<boolean> {
    if (this.inflight) return this.inflight;
    const url = this.opts.jwksUrl;
    const now = this.opts.now();
    if (!url || this.closed || now - this.lastAttemptAt < this.opts.cooldownMs) return Promise.resolve(false);
    this.lastAttemptAt = now;
    this.fetches++;
    this.inflight = this.fetchAndInstall(url).finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  stats(): KeySetStats {
    return {
      keyIds: [...this.keys.keys()],
      loadedAtMs: this.loadedAt,
      fetches: this.fetches,
      fetchFailures: this.fetchFailures,
    };
  }

  close(): void {
    this.closed = true;
    this.abort.abort();
  }

  private async fetchAndInstall(url: URL): Promise<boolean> {
    try {
      const doc = await this.fetchJwks(url);
      const ok = await this.install(doc, url.href);
      if (!ok) throw new Error('the JWKS has no usable keys');
      return true;
    } catch (err) {
      this.fetchFailures++;
      this.lastError = err instanceof Error ? err : new Error(String(err));
      if (!this.closed) {
        this.opts.log?.warn(
          { jwks: url.href, err: this.lastError, keptKeys: this.keys.size },
          'jwks: fetch failed; keeping the last good key set',
        );
      }
      return false;
    }
  }

  private async fetchJwks(url: URL): Promise<unknown> {
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.opts.fetchTimeoutMs)]);
    const res = await fetch(url, { signal, redirect: 'error', headers: { accept: 'application/json' } });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new Error(`JWKS endpoint answered ${res.status}`);
    }
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > MAX_JWKS_BYTES) {
      await res.body?.cancel();
      throw new Error(`JWKS document is larger than ${MAX_JWKS_BYTES} bytes`);
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    if (res.body) {
      for await (const chunk of res.body) {
        size += chunk.byteLength;
        if (size > MAX_JWKS_BYTES) throw new Error(`JWKS document is larger than ${MAX_JWKS_BYTES} bytes`);
        chunks.push(chunk);
      }
    }
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      throw new Error('JWKS document is not valid JSON');
    }
  }

  /** Imports a JWKS document and replaces the set. False (set unchanged) when no key is usable. */
  private async install(doc: unknown, source: string): Promise<boolean> {
    const list = (doc as { keys?: unknown } | null)?.keys;
    if (!Array.isArray(list)) throw new Error('JWKS document has no keys array');
    if (list.length > MAX_JWKS_KEYS) throw new Error(`JWKS document has more than ${MAX_JWKS_KEYS} keys`);
    const next = new Map<string, PinnedKey>();
    const duplicated = new Set<string>();
    for (const jwk of list) {
      let key: PinnedKey;
      try {
        key = await importPinnedKey(jwk);
      } catch (err) {
        const kid = (jwk as { kid?: unknown } | null)?.kid;
        this.opts.log?.warn(
          {
            jwks: source,
            kid: typeof kid === 'string' ? kid.slice(0, 64) : undefined,
            reason: err instanceof Error ? err.message : String(err),
          },
          'jwks: key skipped',
        );
        continue;
      }
      // Two keys under one kid make the lookup ambiguous: neither is trusted.
      if (next.has(key.kid) || duplicated.has(key.kid)) {
        duplicated.add(key.kid);
        next.delete(key.kid);
        this.opts.log?.warn({ jwks: source, kid: key.kid }, 'jwks: duplicate kid; both keys skipped');
        continue;
      }
      // Keep the already-imported object for an unchanged key: cached verifications stay valid.
      const old = this.keys.get(key.kid);
      next.set(key.kid, old && old.fingerprint === key.fingerprint ? old : key);
    }
    if (next.size === 0) return false;
    this.keys = next;
    this.loadedAt = this.opts.now();
    this.lastError = undefined;
    this.opts.log?.info({ jwks: source, kids: [...next.keys()] }, 'jwks: key set loaded');
    return true;
  }
}
