/**
 * The revocation list: `GET /.well-known/revoked-tokens.json`, what the sidecars poll to refuse
 * revoked access tokens within seconds (README, "Revocation and the edge"). Access tokens are
 * verified at the edge without a database, so a revocation has to be brought to the edge; this is
 * the pull half, polled like the JWKS (conditionally, with the ETag, on a short interval).
 *
 * ```json
 * {"iss": "https://id.example", "complete": true,
 *  "sid": {"<grant id>": 1767225600},
 *  "jti": {"<jti>": 1767224700}}
 * ```
 *
 * A token is revoked when its `sid` (its family: the grant) is a key of `sid`, or its `jti` a key
 * of `jti`. Each value is the latest `exp` (epoch seconds) a token it names can carry: a family's is
 * its revocation time plus the access-token lifetime plus {@link FAMILY_MARGIN_MS} (a refresh that
 * rotated just before the revocation may sign a moment after it); an access token's is its own
 * `exp`. Entries stay listed until that time plus the clock skew has passed, then drop out: the
 * tokens they name are refused as expired from then on. Like a certificate revocation list, the
 * document is public: it names ids, never a token, a user or a client.
 *
 * Bounded: at most {@link MAX_REVOCATION_ENTRIES} entries (about 6 MB), families first, newest
 * first; beyond that `complete` is false, the oldest revocations are left out and an error is
 * logged (a sidecar keeps every entry it has already fetched until its expiry, so only revocations
 * it never saw are missed).
 *
 * Cost: each replica builds the document at most once per {@link LIST_CACHE_MS} however many
 * sidecars poll, and at once after a revocation it made itself; the ETag is the hash of the exact
 * bytes, so an unchanged list is a bodiless 304.
 */
import type { Clock } from '../../shared/clock.js';
import type { Pool } from '../../shared/db.js';
import type { Handler } from '../../shared/http.js';
import type { Logger } from '../../shared/log.js';
import { listRevoked } from '../tokens/revocation-store.js';
import { ifNoneMatchHits, strongEtag } from './discovery.js';
import type { OAuthSettings } from './settings.js';

/** At most this many entries are published (families first). */
export const MAX_REVOCATION_ENTRIES = 100_000;
/** How long a replica reuses the document it built (other replicas' revocations wait at most this). */
export const LIST_CACHE_MS = 1_000;
/** Added to a family's lifetime: a token signed just after the revocation committed is still listed. */
export const FAMILY_MARGIN_MS = 60_000;

export interface RevocationDocument {
  iss: string;
  complete: boolean;
  sid: Record<string, number>;
  jti: Record<string, number>;
}

/** The document from the rows (pure). */
export function revocationDocument(
  issuer: string,
  rows: { families: readonly { id: string; exp: number }[]; tokens: readonly { id: string; exp: number }[]; complete: boolean },
): RevocationDocument {
  const sid: Record<string, number> = {};
  for (const f of rows.families) sid[f.id] = f.exp;
  const jti: Record<string, number> = {};
  for (const t of rows.tokens) jti[t.id] = t.exp;
  return { iss: issuer, complete: rows.complete, sid, jti };
}

interface Built {
  body: string;
  etag: string;
  entries: number;
}

/** Builds and caches the document for one replica. */
export class RevocationList {
  private cached: (Built & { gen: number; at: number }) | undefined;
  private inflight: { gen: number; p: Promise<Built> } | undefined;
  private gen = 0;
  private wasComplete = true;

  constructor(
    private readonly pool: Pool,
    private readonly settings: OAuthSettings,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** After a revocation committed by this process: the next request rebuilds the document. */
  invalidate(): void {
    this.gen++;
    this.cached = undefined;
  }

  /** The current document (cached up to LIST_CACHE_MS, single flight). */
  current(): Promise<Built> {
    const now = this.clock.now();
    const c = this.cached;
    if (c && c.gen === this.gen && now - c.at < LIST_CACHE_MS) return Promise.resolve(c);
    // A build started before an invalidation may have read the database before that revocation.
    if (this.inflight?.gen === this.gen) return this.inflight.p;
    const gen = this.gen;
    const p = this.build(now)
      .then((b) => {
        if (gen === this.gen) this.cached = { ...b, gen, at: now };
        return b;
      })
      .finally(() => {
        if (this.inflight?.p === p) this.inflight = undefined;
      });
    this.inflight = { gen, p };
    return p;
  }

  private async build(nowMs: number): Promise<Built> {
    const s = this.settings;
    const rows = await listRevoked(this.pool, {
      nowMs,
      familyLifetimeMs: s.accessTokenTtlMs + FAMILY_MARGIN_MS,
      skewMs: s.clockSkewSec * 1000,
      max: MAX_REVOCATION_ENTRIES,
    });
    if (rows.complete !== this.wasComplete) {
      this.wasComplete = rows.complete;
      if (!rows.complete)
        this.log.error(
          { max: MAX_REVOCATION_ENTRIES },
          'revocation list: more live revocations than it can publish; the oldest are left out (sidecars keep those they already have)',
        );
      else this.log.info('revocation list: complete again');
    }
    const body = JSON.stringify(revocationDocument(s.issuer, rows));
    return { body, etag: strongEtag(body), entries: rows.families.length + rows.tokens.length };
  }
}

/** `GET /.well-known/revoked-tokens.json`: the document, `ETag`, and 304 for a matching `If-None-Match`. */
export function revocationListEndpoint(list: RevocationList): Handler {
  return async (ctx) => {
    const doc = await list.current();
    // no-cache: a cache may keep it but must ask again every time (the list is only useful fresh).
    const headers = { 'cache-control': 'no-cache', etag: doc.etag };
    if (ifNoneMatchHits(ctx.headers['if-none-match'], doc.etag)) return { status: 304, headers };
    return { body: doc.body, contentType: 'application/json', headers };
  };
}
