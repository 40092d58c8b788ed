/**
 * The preference cache of one notifier replica (README, "Notification types, preferences and
 * policies": a change applies at once). Entries live NOTIFIER_PREFERENCES_TTL at most; a write on
 * any replica NOTIFYs `notifier_preferences` with the user id, and every replica's listener drops
 * that entry at once ({@link PreferenceCache.invalidate}); the TTL is the backstop for a
 * notification missed while the LISTEN connection was down, during which nothing is cached at all
 * (a reconnect clears the cache, see app.ts).
 *
 * A load racing an invalidation never stores what it read: each invalidation bumps an epoch, and
 * a load stores its result only if its user was not invalidated since the load began. When a load
 * fails (the store is unreachable), an entry past its TTL is still used, and a user with none is
 * reported `unavailable` (the caller applies the conservative default, counted in a metric).
 *
 * The router reads through this cache. The delivery worker's check just before the provider call
 * does not: it reads the row itself, under the lock a preference write takes (policy/gate.ts).
 */
import type { Clock } from '../../shared/clock.js';
import type { PreferenceDoc } from './document.js';

export interface PreferenceCacheOptions {
  ttlMs: number;
  maxEntries: number;
  clock: Clock;
  /** True while this replica hears preference writes (its LISTEN connection is up): nothing is cached otherwise. */
  listening: () => boolean;
  /** Reads the stored documents of these users (a user without one gets EMPTY_PREFERENCES); `get` may be given another. */
  load: (userIds: readonly string[]) => Promise<Map<string, PreferenceDoc>>;
}

interface Entry {
  doc: PreferenceDoc;
  at: number;
}

export class PreferenceCache {
  readonly #o: PreferenceCacheOptions;
  readonly #entries = new Map<string, Entry>();
  /** The epoch of each user's last invalidation, kept while loads are in flight. */
  readonly #invalidated = new Map<string, number>();
  #epoch = 0;
  /** The epoch of the last {@link clear}: loads begun before it store nothing. */
  #clearedAt = 0;
  #loading = 0;

  constructor(opts: PreferenceCacheOptions) {
    this.#o = opts;
  }

  invalidate(userId: string): void {
    this.#epoch++;
    this.#entries.delete(userId);
    if (this.#loading > 0) this.#invalidated.set(userId, this.#epoch);
  }

  /** Forgets everything: on every (re)connect of the listener, which may have missed writes while away. */
  clear(): void {
    this.#epoch++;
    this.#entries.clear();
    this.#invalidated.clear();
    this.#clearedAt = this.#epoch;
  }

  /** Whether an entry for the user is held (expired or not). */
  has(userId: string): boolean {
    return this.#entries.has(userId);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Each user's preferences, or `unavailable` when they could not be read and none are cached. */
  async get(
    userIds: readonly string[],
    load: (userIds: readonly string[]) => Promise<Map<string, PreferenceDoc>> = this.#o.load,
  ): Promise<Map<string, PreferenceDoc | 'unavailable'>> {
    const now = this.#o.clock.now();
    const out = new Map<string, PreferenceDoc | 'unavailable'>();
    const missing: string[] = [];
    for (const id of new Set(userIds)) {
      const e = this.#entries.get(id);
      if (e && now - e.at < this.#o.ttlMs) out.set(id, e.doc);
      else missing.push(id);
    }
    if (missing.length === 0) return out;
    const began = this.#epoch;
    this.#loading++;
    try {
      const loaded = await load(missing);
      for (const id of missing) {
        const doc = loaded.get(id);
        if (!doc) continue;
        out.set(id, doc);
        if (this.#o.listening() && this.#clearedAt <= began && (this.#invalidated.get(id) ?? 0) <= began) this.#store(id, doc, now);
      }
      return out;
    } catch {
      for (const id of missing) out.set(id, this.#entries.get(id)?.doc ?? 'unavailable');
      return out;
    } finally {
      if (--this.#loading === 0) this.#invalidated.clear();
    }
  }

  #store(id: string, doc: PreferenceDoc, now: number): void {
    this.#entries.delete(id);
    this.#entries.set(id, { doc, at: now });
    if (this.#entries.size > this.#o.maxEntries) {
      // The oldest insertion goes first (a Map iterates in insertion order).
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
  }
}
