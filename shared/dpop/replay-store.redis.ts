/**
 * The Redis replay store: `SET <prefix><key> 1 NX PX <ttl>`, one round trip; every process on the
 * same Redis shares it, so a proof accepted by one sidecar is refused by all the others.
 */
import type { DpopReplayStore } from './replay-store.js';

/** The one command used (ioredis's `Redis` and `Cluster` both fit). */
export interface RedisSetNx {
  set(key: string, value: string, px: 'PX', ttlMs: number, nx: 'NX'): Promise<'OK' | null>;
}

export class RedisReplayStore implements DpopReplayStore {
  constructor(
    private readonly redis: RedisSetNx,
    private readonly prefix = 'dpop:jti:',
  ) {}

  async claim(key: string, ttlMs: number): Promise<boolean> {
    const r = await this.redis.set(this.prefix + key, '1', 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX');
    return r === 'OK';
  }
}
