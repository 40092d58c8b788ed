/**
 * The Redis Lua scripts of approximate mode (lease.ts): taking a lease of tokens and giving back
 * what a lease did not spend. Both reuse the admission script's algorithms and key layout `v1`
 * unchanged (the same keys and values as exact decisions, so a quota can switch between exact and
 * approximate without stranding state).
 *
 * TAKE (`LEASE_TAKE_LUA`), same keys as the admission script:
 * ```
 * KEYS[1] = subject bucket            KEYS[2] = global bucket shard (optional)
 * ARGV    = alg rate burst interval want [galg grate gburst ginterval gscale] min
 * reply   = the admission script's reply, then `granted`
 * ```
 * It grants `n`, the most tokens ≤ `want` that both buckets can give now (the global bucket gives
 * `n × gscale` of its own: one shard's share), and charges `n` to both exactly like an admitted
 * request of cost `n` (the reply's figures and states are that admission's). When fewer than
 * `min` (the cost of the request waiting for the lease) are there, nothing is taken, `granted` is
 * 0 and the reply is the admission script's refusal of a request of cost `min`, states included,
 * so the refusal cache can answer the next ones.
 *
 * GIVE (`LEASE_GIVE_LUA`): `ARGV = alg rate burst interval n [galg grate gburst ginterval gn]`,
 * credits `n` unspent tokens back to each bucket, at the stored state's instant and in its units
 * (a token bucket capped at its burst, a leaky bucket floored at empty), its expiry kept. No refill
 * is computed, so `rate` and `interval` are not used: a lease taken under limits that have changed
 * since credits its tokens, never a refill at the old rate. A bucket with no state (at rest: full)
 * or with another algorithm's state is left alone. Window algorithms are never leased.
 *
 * Clock: Redis `TIME`, as in the admission script.
 */
import { ALGORITHMS_LUA, MAIN_LUA, REDIS_TIME_CLOCK } from './admit-script.js';

const TAKE_PRELUDE = `
local lmin = tonumber(ARGV[#ARGV])
local n = tonumber(ARGV[5])
do
  local tag, sa, sb, sc = load(KEYS[1])
  local _, _, r0 = ALGORITHMS[tonumber(ARGV[1])](tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tag, sa, sb, sc, now, 0)
  if r0 < n then n = r0 end
  if #KEYS > 1 then
    local gtag, ga, gb, gc = load(KEYS[2])
    local _, _, g0 = ALGORITHMS[tonumber(ARGV[6])](tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), gtag, ga, gb, gc, now, 0)
    g0 = math.floor(g0 / tonumber(ARGV[10]))
    if g0 < n then n = g0 end
  end
end
local granted = n
if n < lmin then
  granted = 0
  n = lmin
end
ARGV[5] = n
if #KEYS > 1 then ARGV[10] = n * tonumber(ARGV[10]) end
local function main()
`;

const TAKE_TAIL = `
end
local r = main()
if r[1] ~= 1 then granted = 0 end
r[#r + 1] = granted
return r
`;

/** Takes a lease (see the module comment). */
export const LEASE_TAKE_LUA = `${ALGORITHMS_LUA}\n${REDIS_TIME_CLOCK}\n${TAKE_PRELUDE}${MAIN_LUA}${TAKE_TAIL}`;

const GIVE_MAIN = `
local function credit(key, alg, burst, n)
  if n <= 0 then return end
  local tag, sa, sb, sc = load(key)
  if tag ~= alg then return end
  -- Credited at the stored instant in the stored units (sc): no refill is computed here, so the
  -- lease's rate (the quota may have changed since the take) never enters. The same level at now
  -- as crediting after the refill: the next decision refills and caps with the current limits.
  local cap = burst * sc
  local level
  if alg == 1 then
    level = sa + n * sc
    if level > cap then level = cap end
  elseif alg == 3 then
    level = sa - n * sc
    if level < 0 then level = 0 end
  else
    return
  end
  -- A credit only brings the bucket's rest earlier: its expiry is kept.
  local ttl = redis.call('PTTL', key)
  if ttl < 1 then ttl = 1 end
  redis.call('SET', key, string.format('%d:%.17g:%.17g:%.17g', alg, level, sb, sc), 'PX', ttl)
end
credit(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[5]))
if #KEYS > 1 then
  credit(KEYS[2], tonumber(ARGV[6]), tonumber(ARGV[8]), tonumber(ARGV[10]))
end
return now
`;

/** Gives back a lease's unspent tokens (see the module comment). */
export const LEASE_GIVE_LUA = `${ALGORITHMS_LUA}\n${REDIS_TIME_CLOCK}\n${GIVE_MAIN}`;

/**
 * Registers a sidecar as a lessee and counts the live ones (lease sizes divide by this count).
 * `KEYS[1]` a sorted set; `ARGV = id, ttlMs`: the member's score is Redis TIME, members older
 * than `ttlMs` are dropped, the set expires after `ttlMs` without a registration.
 */
export const LEASE_PEERS_LUA = `
${REDIS_TIME_CLOCK}
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZCARD', KEYS[1])
`;
