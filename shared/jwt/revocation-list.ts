/**
 * The issuer's revocation list, held by a resource server (the sidecar): which token families
 * (`sid`) and which access tokens (`jti`) were revoked, so that a revoked token is refused within
 * seconds although tokens are verified without asking the issuer. identity publishes it at
 * `/.well-known/revoked-tokens.json` (identity/oauth/revocation-list.ts):
 *
 * ```json
 * {"iss": "https://id.example", "complete": true, "sid": {"<grant id>": 1767225600}, "jti": {"<jti>": 1767224700}}
 * ```
 *
 * Each value is the latest `exp` a token it names can carry.
 *
 * - **Pure core.** {@link RevokedSet} holds the entries: `merge` adds a document's (an entry
 *   already held keeps the later expiry), `sweep` drops those whose `exp` plus the clock tolerance
 *   has passed (a token they name is refused as expired from then on), `isRevoked` is the hot
 *   path: nothing when the set is empty, else one `Map.has` per id the token carries (`sid`, `jti`).
 * - **Never forget early.** A fetched document is merged, not swapped in: an entry leaves only at
 *   its expiry, so a document that lacks it (an identity replica lagging behind, a list truncated
 *   at its size bound, a database restored from a backup) does not bring a revoked token back.
 * - **Fetching** follows the key set's rules (key-set.ts): a background timer every
 *   `refreshIntervalMs` (unref'd, stopped by `close()`), conditional with the ETag of the last 200
 *   (a 304 changes nothing), one fetch at a time, a deadline per fetch, a size bound. A failed
 *   fetch (identity down, a 5xx, a bad document, another issuer's list) keeps everything held and
 *   is logged once per outage; the next tick tries again.
 * - **Before the first list.** Verifications wait for the first fetch to settle (once; at start
 *   the key set is being fetched from the same service anyway). If it failed, tokens are accepted
 *   as if nothing were revoked, with a warning, until a fetch succeeds: refusing every token
 *   because the list is unreachable would turn an identity outage into an edge outage.
 */
import type { Logger } from '../log.js';
import { readBoundedJson } from './json-body.js';

/** A list larger than this is refused (identity publishes at most 100,000 entries, about 6 MB). */
export const MAX_REVOCATION_LIST_BYTES = 16 * 1024 * 1024;
/** Ids longer than this are skipped (grant ids are UUIDs, jtis 22 characters). */
const MAX_ID_LENGTH = 256;

export interface RevocationDocumentEntries {
  readonly sid: ReadonlyMap<string, number>;
  readonly jti: ReadonlyMap<string, number>;
}

/** Reads a revocation list document (pure). Throws on a document that is not one, or another issuer's. */
export function parseRevocationDocument(doc: unknown, issuer: string): RevocationDocumentEntries {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new Error('revocation list is not a JSON object');
  const d = doc as Record<string, unknown>;
  if (d.iss !== issuer) throw new Error('revocation list names another issuer');
  const read = (name: 'sid' | 'jti'): Map<string, number> => {
    const v = d[name];
    const out = new Map<string, number>();
    if (v === undefined) return out;
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error(`revocation list member ${name} is not an object`);
    for (const [id, exp] of Object.entries(v as Record<string, unknown>)) {
      if (id.length === 0 || id.length > MAX_ID_LENGTH || typeof exp !== 'number' || !Number.isFinite(exp)) continue;
      out.set(id, exp);
    }
    return out;
  };
  return { sid: read('sid'), jti: read('jti') };
}

/** The revoked ids held, each until its expiry (see the module comment). */
export class RevokedSet {
  private readonly sids = new Map<string, number>();
  private readonly jtis = new Map<string, number>();

  /** @param toleranceSec the verifier's clock tolerance: a token is accepted until `exp` + this. */
  constructor(private readonly toleranceSec: number) {}

  get size(): number {
    return this.sids.size + this.jtis.size;
  }

  /** Adds a document's entries, keeping the later expiry of an id held twice; expired ones are skipped. */
  merge(entries: RevocationDocumentEntries, nowMs: number): void {
    const floor = nowMs / 1000 - this.toleranceSec;
    for (const [from, into] of [
      [entries.sid, this.sids],
      [entries.jti, this.jtis],
    ] as const) {
      for (const [id, exp] of from) {
        if (exp <= floor) continue;
        const held = into.get(id);
        if (held === undefined || held < exp) into.set(id, exp);
      }
    }
  }

  /** Drops the entries whose tokens have all expired. */
  sweep(nowMs: number): void {
    const floor = nowMs / 1000 - this.toleranceSec;
    for (const m of [this.sids, this.jtis]) for (const [id, exp] of m) if (exp <= floor) m.delete(id);
  }

  /** The hot path: whether a token with this `jti` (and family `sid`) is revoked. */
  isRevoked(jti: string, sid: string | undefined): boolean {
    if (this.sids.size === 0 && this.jtis.size === 0) return false;
    return this.jtis.has(jti) || (sid !== undefined && this.sids.has(sid));
  }
}

export interface RevocationListOptions {
  url: URL;
  /** The issuer the document must name (the verifier's). */
  issuer: string;
  /** Background refresh period, ms (> 0). */
  refreshIntervalMs: number;
  fetchTimeoutMs: number;
  clockToleranceSec: number;
  now: () => number;
  log?: Logger;
}

export interface RevocationListStats {
  entries: number;
  /** Clock time (epoch ms) of the last successful fetch (200 or 304), if any. */
  loadedAtMs: number | undefined;
  fetches: number;
  fetchFailures: number;
  notModified: number;
}

/** The revocation list of one issuer, fetched in the background. */
export class RevocationList {
  private readonly set: RevokedSet;
  private etag: string | undefined;
  private loadedAt: number | undefined;
  private inflight: Promise<boolean> | undefined;
  private fetches = 0;
  private fetchFailures = 0;
  private notModified = 0;
  private failureStreak = 0;
  private closed = false;
  private readonly timer: NodeJS.Timeout;
  private readonly abort = new AbortController();
  /** True once the first fetch has settled, whichever way. */
  settled = false;
  /** Resolves when the first fetch has settled (never rejects). */
  readonly first: Promise<void>;

  constructor(private readonly opts: RevocationListOptions) {
    this.set = new RevokedSet(opts.clockToleranceSec);
    this.first = this.refresh().then(
      (ok) => {
        this.settled = true;
        if (!ok && !this.closed)
          opts.log?.warn({ url: opts.url.href }, 'revocation list: not loaded; revoked tokens pass until a fetch succeeds');
      },
      () => {
        this.settled = true;
      },
    );
    this.timer = setInterval(() => void this.refresh(), opts.refreshIntervalMs);
    this.timer.unref();
  }

  /** Whether a verified token is revoked (one or two Map lookups; nothing when none are held). */
  isRevoked(jti: string, sid: string | undefined): boolean {
    return this.set.isRevoked(jti, sid);
  }

  /** Fetches now (joins a fetch in flight). True when the list is current. Public for tests. */
  refresh(): Promise<boolean> {
    if (this.inflight) return this.inflight;
    if (this.closed) return Promise.resolve(false);
    this.fetches++;
    this.inflight = this.fetchAndMerge().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  stats(): RevocationListStats {
    return {
      entries: this.set.size,
      loadedAtMs: this.loadedAt,
      fetches: this.fetches,
      fetchFailures: this.fetchFailures,
      notModified: this.notModified,
    };
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    this.abort.abort();
  }

  private async fetchAndMerge(): Promise<boolean> {
    const url = this.opts.url;
    try {
      const fetched = await this.fetchDocument(url);
      const now = this.opts.now();
      if (fetched === 'not-modified') this.notModified++;
      else {
        this.set.merge(parseRevocationDocument(fetched.doc, this.opts.issuer), now);
        this.etag = fetched.etag;
      }
      this.set.sweep(now);
      this.loadedAt = now;
      if (this.failureStreak > 0) this.opts.log?.info({ url: url.href, failures: this.failureStreak }, 'revocation list: fetch recovered');
      this.failureStreak = 0;
      return true;
    } catch (err) {
      this.fetchFailures++;
      this.failureStreak++;
      // Entries still expire while the issuer is unreachable.
      this.set.sweep(this.opts.now());
      if (!this.closed) {
        this.opts.log?.[this.failureStreak === 1 ? 'warn' : 'debug'](
          { url: url.href, err: err instanceof Error ? err : new Error(String(err)), kept: this.set.size, failures: this.failureStreak },
          'revocation list: fetch failed; keeping the entries held until they expire',
        );
      }
      return false;
    }
  }

  private async fetchDocument(url: URL): Promise<'not-modified' | { doc: unknown; etag: string | undefined }> {
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.opts.fetchTimeoutMs)]);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.etag !== undefined) headers['if-none-match'] = this.etag;
    const res = await fetch(url, { signal, redirect: 'error', headers });
    if (res.status === 304 && headers['if-none-match'] !== undefined) {
      await res.body?.cancel();
      return 'not-modified';
    }
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new Error(`revocation list endpoint answered ${res.status}`);
    }
    return readBoundedJson(res, MAX_REVOCATION_LIST_BYTES, 'revocation list');
  }
}
