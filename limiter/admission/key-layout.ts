/**
 * Redis key layout of the counter store, version `v1`:
 *
 * ```
 * <prefix>:v1:{s<shard>}:k:<bucket key>   a subject's bucket   e.g. rl:v1:{s7}:k:key:9f86d0…
 * <prefix>:v1:{s<shard>}:g:<name>         shard <shard> of a global bucket   e.g. rl:v1:{s7}:g:global
 * ```
 *
 * - The hash tag `{s<shard>}` puts a subject's key and one shard of each global bucket in the same
 *   Redis Cluster slot, so the one script that decides a request touches one slot.
 *   `shard = fnv1a32(bucket key) mod S`, S the configured shard count (1 on a standalone Redis:
 *   every key carries `{s0}` and the global bucket is exact).
 * - The value is a string `<algorithm code>:<a>:<b>:<c>` (see `BucketState`), set with a PX expiry
 *   equal to the time until the bucket is back at rest, so an idle subject costs nothing and an
 *   expired key reads exactly as the state it had.
 * - The layout version names both the key format and the value format. A change to either is a new
 *   version (`v2`), written beside `v1` by a candidate script in shadow (see
 *   `counter-store.redis.ts`), never in place.
 */

/** The layout version the enforcing script reads and writes. */
export const KEY_LAYOUT_VERSION = 'v1';

/** FNV-1a (32-bit) over the UTF-16 code units of `key`, mod `shards`. Stable across processes. */
export function shardOf(key: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}

/** The common head of every key in one shard: `<prefix>:<version>:{s<shard>}:`. */
export function shardHead(prefix: string, version: string, shard: number): string {
  return `${prefix}:${version}:{s${shard}}:`;
}

/** A subject bucket's key. */
export function bucketKey(prefix: string, version: string, shard: number, key: string): string {
  return `${shardHead(prefix, version, shard)}k:${key}`;
}

/** One shard of a global bucket's key. */
export function globalKey(prefix: string, version: string, shard: number, name: string): string {
  return `${shardHead(prefix, version, shard)}g:${name}`;
}

/** Why a prefix or version cannot be used in keys, or `undefined` when it can. */
export function checkKeyPart(part: string): string | undefined {
  if (part.length === 0) return 'must not be empty';
  if (/[{}\s]/.test(part)) return 'must not contain braces or whitespace (they would change the hash tag)';
  return undefined;
}
