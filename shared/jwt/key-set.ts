/**
 * The verifier's set of signing keys: static (a JWKS given in config) or remote (identity's
 * `/.well-known/jwks.json`), cached by kid.
 *
 * Remote fetching follows these rules:
 * - **Background refresh.** Every `refreshIntervalMs` (a real, unref'd timer, stopped by
 *   `close()`) the set is fetched again with `If-None-Match` carrying the ETag of the set we
 *   hold: a 304 keeps the set and counts as fresh, a 200 replaces it. This is what bounds how long
 *   a key deleted from identity's set (an emergency revocation) keeps verifying here: one interval
 *   plus one fetch, whether or not any token arrives meanwhile.
 * - **Single flight.** At most one fetch is in progress; everyone who needs it awaits the same one,
 *   the timer included.
 * - **Cooldown.** A fetch triggered by a caller (an unknown kid, a stale set, `ready()`) starts at
 *   most once per `cooldownMs`, so a flood of tokens with random kids costs one fetch per window,
 *   not one per token. Timer fetches are not counted: they come at their own fixed pace, so the
 *   total is at most one fetch per interval plus one per cooldown.
 * - **Stale is better than nothing.** The set is also refreshed (without delaying the verification
 *   that noticed) once older than `maxAgeMs`, the safety net when the timer is off; a failed fetch
 *   keeps the last good set: when identity is down, tokens signed by known keys still verify. A
 *   successful 200 replaces the set whole, which is how a retired or revoked key stops verifying.
 */
import type { Logger } from '../log.js';
import { importPinnedKey, type JwksDocument, type PinnedKey } from './keys.js';
import { readBoundedJson } from './json-body.js';

export interface KeySetOptions {
  jwksUrl?: URL;
  keys?: JwksDocument;
  cooldownMs: number;
  maxAgeMs: number;
  /** Background refresh period of a remote set, ms; 0: no timer (refreshed only when stale or on an unknown kid). */
  refreshIntervalMs: number;
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
  /** Clock time (epoch ms) of the last successful load or 304 confirmation, if any. */
  loadedAtMs: number | undefined;
  fetches: number;
  fetchFailures: number;
  /** Fetches answered 304 Not Modified (the set we hold is current). */
  notModified: number;
}

export class KeySet {
  private keys = new Map<string, PinnedKey>();
  private loadedAt: number | undefined;
  private lastAttemptAt = Number.NEGATIVE_INFINITY;
  private inflight: Promise<boolean> | undefined;
  private lastError: Error | undefined;
  private fetches = 0;
  private fetchFailures = 0;
  private notModified = 0;
  /** Failed fetches in a row: the first is logged as a warning, the rest at debug until one succeeds. */
  private failureStreak = 0;
  /** The ETag of the 200 response whose set we hold; sent back as If-None-Match. */
  private etag: string | undefined;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
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
    if (opts.jwksUrl && opts.refreshIntervalMs > 0) {
      this.timer = setInterval(() => void this.refreshInBackground(), opts.refreshIntervalMs);
      this.timer.unref();
    }
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

  /**
   * Single-flight, cooled-down fetch. Resolves true when a fetch ran and the set is current (a new
   * set installed, or a 304 for the one held).
   */
  refresh(): Promise<boolean> {
    if (this.inflight) return this.inflight;
    const now = this.opts.now();
    if (!this.opts.jwksUrl || this.closed || now - this.lastAttemptAt < this.opts.cooldownMs) return Promise.resolve(false);
    this.lastAttemptAt = now;
    return this.startFetch(this.opts.jwksUrl);
  }

  /**
   * What the timer runs: joins the fetch in flight or starts one, outside the cooldown (the timer
   * paces itself). Public so tests can drive a refresh without waiting for the timer.
   */
  refreshInBackground(): Promise<boolean> {
    if (this.inflight) return this.inflight;
    if (!this.opts.jwksUrl || this.closed) return Promise.resolve(false);
    return this.startFetch(this.opts.jwksUrl);
  }

  private startFetch(url: URL): Promise<boolean> {
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
      notModified: this.notModified,
    };
  }

  /** Stops the refresh timer and aborts a fetch in flight. */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    this.abort.abort();
  }

  private async fetchAndInstall(url: URL): Promise<boolean> {
    try {
      const fetched = await this.fetchJwks(url);
      if (fetched === 'not-modified') {
        this.notModified++;
        this.loadedAt = this.opts.now();
        this.lastError = undefined;
      } else {
        const ok = await this.install(fetched.doc, url.href);
        if (!ok) throw new Error('the JWKS has no usable keys');
        this.etag = fetched.etag;
      }
      if (this.failureStreak > 0) this.opts.log?.info({ jwks: url.href, failures: this.failureStreak }, 'jwks: fetch recovered');
      this.failureStreak = 0;
      return true;
    } catch (err) {
      this.fetchFailures++;
      this.failureStreak++;
      this.lastError = err instanceof Error ? err : new Error(String(err));
      if (!this.closed) {
        // The timer retries every interval: one warning per outage, not one per attempt.
        this.opts.log?.[this.failureStreak === 1 ? 'warn' : 'debug'](
          { jwks: url.href, err: this.lastError, keptKeys: this.keys.size, failures: this.failureStreak },
          'jwks: fetch failed; keeping the last good key set',
        );
      }
      return false;
    }
  }

  private async fetchJwks(url: URL): Promise<'not-modified' | { doc: unknown; etag: string | undefined }> {
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.opts.fetchTimeoutMs)]);
    const headers: Record<string, string> = { accept: 'application/json' };
    // Only while we hold the set that ETag names: a 304 must never stand in for a set we lack.
    if (this.etag !== undefined && this.keys.size > 0) headers['if-none-match'] = this.etag;
    const res = await fetch(url, { signal, redirect: 'error', headers });
    if (res.status === 304 && headers['if-none-match'] !== undefined) {
      await res.body?.cancel();
      return 'not-modified';
    }
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new Error(`JWKS endpoint answered ${res.status}`);
    }
    return readBoundedJson(res, MAX_JWKS_BYTES, 'JWKS document');
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
    const changed = next.size !== this.keys.size || [...next].some(([kid, key]) => this.keys.get(kid) !== key);
    this.keys = next;
    this.loadedAt = this.opts.now();
    this.lastError = undefined;
    // A server without ETags answers 200 every interval: only a change is worth a line.
    if (changed) this.opts.log?.info({ jwks: source, kids: [...next.keys()] }, 'jwks: key set loaded');
    return true;
  }
}
