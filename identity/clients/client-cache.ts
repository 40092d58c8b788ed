/**
 * Registered clients kept in memory for a short time, so the token endpoint's hot path
 * (client credentials: thousands per second) does not read the registry on every request.
 *
 * Only clients that exist are kept (random unknown ids cannot fill the cache), for `ttlMs`
 * (2 s by default). A change made through this process's admin API is seen here at once (it
 * invalidates); a change made on another replica (a rotated secret, a deleted client) is seen here
 * within `ttlMs`.
 */
import type { Clock } from '../../shared/clock.js';
import type { OAuthClient } from './client.js';

export const CLIENT_CACHE_TTL_MS = 2_000;
const MAX_ENTRIES = 10_000;

export class ClientCache {
  private readonly entries = new Map<string, { client: OAuthClient; until: number }>();

  constructor(
    private readonly load: (clientId: string) => Promise<OAuthClient | undefined>,
    private readonly clock: Clock,
    private readonly ttlMs = CLIENT_CACHE_TTL_MS,
  ) {}

  async get(clientId: string): Promise<OAuthClient | undefined> {
    const now = this.clock.now();
    const hit = this.entries.get(clientId);
    if (hit && hit.until > now) return hit.client;
    const client = await this.load(clientId);
    if (!client) {
      this.entries.delete(clientId);
      return undefined;
    }
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
    this.entries.set(clientId, { client, until: now + this.ttlMs });
    return client;
  }

  invalidate(clientId: string): void {
    this.entries.delete(clientId);
  }
}
