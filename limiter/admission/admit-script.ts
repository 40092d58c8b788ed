/**
 * The Redis Lua script that decides one request (key layout `v1`, see `key-layout.ts`).
 *
 * It is the TypeScript algorithms (`token-bucket.ts`, `leaky-bucket.ts`, `fixed-window.ts`,
 * `sliding-window.ts`) and `decide.ts` transcribed line for line: the same integer arithmetic in
 * the same order on IEEE doubles, so the same sequence of (time, cost) gives the same decisions,
 * figures and stored state. test/limiter/admission/script-equivalence.test.ts checks that with
 * random sequences.
 *
 * Calling convention:
 * ```
 * KEYS[1] = subject bucket            KEYS[2] = global bucket shard (optional)
 * ARGV    = alg rate burst interval cost [galg grate gburst ginterval gcost]
 * reply   = { allowed 0|1, binding 0 key|1 global, limit, remaining, resetAtMs, retryAfterMs, nowMs,
 *             ktag, ka, kb, kc, [gtag, ga, gb, gc] }
 * ```
 * The tail is each bucket's state as Redis holds it after the call (the charged state when
 * admitted, the stored one otherwise; tag 0 for none, i.e. at rest): with `nowMs` it is everything
 * a sidecar needs to re-run the same algorithm locally (refusal-cache.ts). Adding these reply
 * fields changed no decision, key or stored value, so it kept layout `v1`.
 * `alg` is the numeric algorithm code (`ALGORITHM_CODE`); `gcost` is the cost charged to the global
 * shard (`cost × shards`). Both buckets are evaluated at one instant and written only when both
 * admit: both or neither, inside one atomic script.
 *
 * Clock: Redis `TIME`, read once per call, is the only clock: never the caller's or the sidecar's.
 * The script body is built around a one-line clock so tests can run the identical algorithm code
 * with a given time ({@link admitScript}); the store only ever loads {@link ADMIT_LUA}, whose clock
 * is `TIME`.
 */

/** The Lua line that defines `now` (epoch ms) from the Redis server's clock. */
export const REDIS_TIME_CLOCK = "local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)";

export const ALGORITHMS_LUA = `
local MIN_RETRY = 1000

-- Each algorithm: (rate, burst, iv, stored alg tag, a, b, c, now, cost)
--   -> allowed, limit, remaining, resetAt, retryAfter, new a, new b, new c

local function token_bucket(rate, burst, iv, tag, sa, sb, sc, now, cost)
  local cap = burst * iv
  local level, last
  if tag ~= 1 then
    level = cap
    last = now
  else
    if sc == iv then level = sa else level = math.floor((sa / sc) * iv) end
    last = sb
    if now > last then
      level = level + (now - last) * rate
      last = now
    end
    if level > cap then level = cap end
  end
  local need = cost * iv
  local allowed = level >= need
  if allowed then level = level - need end
  local lead = last - now
  local reset = last + math.ceil((cap - level) / rate)
  local retry = 0
  if not allowed then
    local target = need
    if need > cap then target = cap end
    retry = lead + math.ceil((target - level) / rate)
    if retry < MIN_RETRY then retry = MIN_RETRY end
  end
  return allowed, burst, math.floor(level / iv), reset, retry, level, last, iv
end

local function leaky_bucket(rate, burst, iv, tag, sa, sb, sc, now, cost)
  local cap = burst * iv
  local level, last
  if tag ~= 3 then
    level = 0
    last = now
  else
    if sc == iv then level = sa else level = math.ceil((sa / sc) * iv) end
    last = sb
    if now > last then
      level = level - (now - last) * rate
      last = now
    end
    if level < 0 then level = 0 end
  end
  local need = cost * iv
  local free = 0
  if level < cap then free = cap - level end
  local allowed = need <= free
  if allowed then level = level + need end
  local remaining
  if allowed then remaining = math.floor((free - need) / iv) else remaining = math.floor(free / iv) end
  local lead = last - now
  local reset = last + math.ceil(level / rate)
  local retry = 0
  if not allowed then
    local over = level + need - cap
    if need > cap then over = level end
    retry = lead + math.ceil(over / rate)
    if retry < MIN_RETRY then retry = MIN_RETRY end
  end
  return allowed, burst, remaining, reset, retry, level, last, iv
end

local function fixed_window(rate, burst, iv, tag, sa, sb, sc, now, cost)
  local start, count
  if tag ~= 4 then
    start = math.floor(now / iv) * iv
    count = 0
  else
    start = sa
    count = sb
    if now >= start + iv then
      start = start + math.floor((now - start) / iv) * iv
      count = 0
    end
  end
  local allowed = count + cost <= rate
  if allowed then count = count + cost end
  local finish = start + iv
  local remaining = 0
  if count < rate then remaining = rate - count end
  local retry = 0
  if not allowed then
    retry = finish - now
    if retry < MIN_RETRY then retry = MIN_RETRY end
  end
  return allowed, rate, remaining, finish, retry, start, count, 0
end

local function sliding_window(rate, burst, iv, tag, sa, sb, sc, now, cost)
  local start, curr, prev
  if tag ~= 2 then
    start = math.floor(now / iv) * iv
    curr = 0
    prev = 0
  else
    start = sa
    curr = sb
    prev = sc
    if now >= start + iv then
      local k = math.floor((now - start) / iv)
      if k == 1 then prev = curr else prev = 0 end
      curr = 0
      start = start + k * iv
    end
  end
  local e = 0
  if now > start then e = now - start end
  local capacity = rate * iv
  local used = prev * (iv - e) + curr * iv
  local need = cost * iv
  local allowed = used + need <= capacity
  if allowed then
    curr = curr + cost
    used = used + need
  end
  local remaining = 0
  if used < capacity then remaining = math.floor((capacity - used) / iv) end
  local rest
  if curr > 0 then rest = start + 2 * iv elseif prev > 0 then rest = start + iv else rest = now end
  local retry = 0
  if not allowed then
    if cost > rate then
      retry = rest - now
    elseif curr + cost <= rate then
      retry = start + iv - math.floor(((rate - curr - cost) * iv) / prev) - now
    else
      retry = start + 2 * iv - math.floor(((rate - cost) * iv) / curr) - now
    end
    if retry < MIN_RETRY then retry = MIN_RETRY end
  end
  return allowed, rate, remaining, rest, retry, start, curr, prev
end

-- Indexed by the algorithm code (quota.v1.Algorithm).
local ALGORITHMS = { token_bucket, sliding_window, leaky_bucket, fixed_window }

local function load(key)
  local v = redis.call('GET', key)
  if not v then return 0, 0, 0, 0 end
  local tag, a, b, c = string.match(v, '^(%d+):([^:]+):([^:]+):([^:]+)$')
  if not tag then return 0, 0, 0, 0 end
  return tonumber(tag), tonumber(a), tonumber(b), tonumber(c)
end

local function save(key, alg, a, b, c, reset, now)
  local ttl = reset - now
  if ttl < 1 then ttl = 1 end
  redis.call('SET', key, string.format('%d:%.17g:%.17g:%.17g', alg, a, b, c), 'PX', ttl)
end
`;

export const MAIN_LUA = `
local alg = tonumber(ARGV[1])
local cost = tonumber(ARGV[5])
local tag, sa, sb, sc = load(KEYS[1])
local ka, kl, kr, kreset, kretry, kna, knb, knc =
  ALGORITHMS[alg](tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tag, sa, sb, sc, now, cost)
if #KEYS < 2 then
  if ka then
    save(KEYS[1], alg, kna, knb, knc, kreset, now)
    return { 1, 0, kl, kr, kreset, 0, now, alg, kna, knb, knc }
  end
  return { 0, 0, kl, kr, kreset, kretry, now, tag, sa, sb, sc }
end
local galg = tonumber(ARGV[6])
local gtag, ga, gb, gc = load(KEYS[2])
local gA, gl, gr, greset, gretry, gna, gnb, gnc =
  ALGORITHMS[galg](tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), gtag, ga, gb, gc, now, tonumber(ARGV[10]))
if ka and gA then
  save(KEYS[1], alg, kna, knb, knc, kreset, now)
  save(KEYS[2], galg, gna, gnb, gnc, greset, now)
  return { 1, 0, kl, kr, kreset, 0, now, alg, kna, knb, knc, galg, gna, gnb, gnc }
end
if not ka then
  local wait = kretry
  if (not gA) and gretry > kretry then wait = gretry end
  local reset = kreset
  if now + wait > reset then reset = now + wait end
  return { 0, 0, kl, kr, reset, wait, now, tag, sa, sb, sc, gtag, ga, gb, gc }
end
local reset = kreset
if now + gretry > reset then reset = now + gretry end
return { 0, 1, kl, 0, reset, gretry, now, tag, sa, sb, sc, gtag, ga, gb, gc }
`;

/**
 * The admission script around a given clock line, which must define a local `now` (epoch ms).
 * Production uses {@link ADMIT_LUA}; other clocks exist for tests that drive time, and are never
 * loaded by the store.
 */
export function admitScript(clockLua: string = REDIS_TIME_CLOCK): string {
  return `${ALGORITHMS_LUA}\n${clockLua}\n${MAIN_LUA}`;
}

/** The enforcing script: layout `v1`, Redis `TIME` as the clock. */
export const ADMIT_LUA = admitScript(REDIS_TIME_CLOCK);
