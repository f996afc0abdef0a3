#!lua name=grudge_LIBVERSION
-- grudge server-side sketch (see doc.go and docs/distributed.md): a Redis
-- Function library, loaded with FUNCTION LOAD and called with
--   FCALL grudge_LIBVERSION numkeys KEYS... ARGV...
-- (LIBVERSION is replaced by the client with a hash of this source, so
-- instances running different versions never call each other's code).
-- A library's top level runs once, at load: the helpers below are created
-- once, not on every call as an EVAL script's would be; each call sets
-- the per-call parameters they read as upvalues (Redis runs one function
-- at a time).
--
-- KEYS     every generation string of one shard, and nothing else: the
--          function touches exactly the keys it is given, as Redis requires
--          (a Redis Cluster routes, and migrates, by the declared keys).
--          Without rotation one key, "{Name}:g"; with rotation the ring
--          "{Name}:g:0" .. "{Name}:g:<G-1>", generation i living in slot
--          i mod G. They share one hash tag, so one cluster slot.
-- ARGV     op cfg nums now pos1 end1 .. posL endL
--   op     "Q" query, "U" update, "A" update and query, "T" try-update,
--          "C" check: the commands the ACL denies this function on KEYS
--          (redis.acl_check_cmd), as a list of strings; no other ARGV
--   cfg    binary, little-endian (struct '<I4I4I4I4ddddBB'): L and M
--          (levels and cells per level), G generations, fp the config
--          fingerprint, P period in ms (0: one generation, never rotated),
--          param (the law's lambda or rate, /s), lo and hi (clamp bounds
--          as configured, saturated at the float32 range's end by the
--          client; a cell stores its clamped value rounded up to float32,
--          and every read caps a score back at hi, see aggregate), kind (0
--          none, 1 exponential, 2 linear) and agg (0 min, 1 max, 2 mean).
--          The same for every call of one sketch: it is decoded once and
--          kept, with what derives from it, in CFGS.
--   nums   binary, little-endian (struct '<ddd'): delta and limit (finite;
--          0 where unused), rebase (ms of age of a generation's epoch that
--          triggers a rebase: 2^31 in production, smaller in tests)
--   now    "" for the server clock (TIME), else ms in decimal (tests only)
--   posN   decimal byte offset of level N's cell in a generation string,
--          40 + 8*((N-1)*M + index), and endN = posN + 7, computed by the
--          client: they go to GETRANGE/SETRANGE as they are.
-- Numbers travel in binary and offsets as ready-made strings because the
-- script's cost is dominated by number<->string conversions (strtod and
-- printf in tonumber and in every numeric redis.call argument), not by the
-- arithmetic.
--
-- A generation string is a 40-byte header followed by L*M cells of 8 bytes:
--   "GRDGSK01" | L u32 | M u32 | fp u32 | 0 u32 | epoch f64 | hw f64
--   cell = little-endian uint64 atomiccell.Word: stamp u32 then score f32
-- epoch is the server ms a stamp counts from; hw the time the generation
-- was created or last rebased, a time at which it was live. A call runs
-- at tm, the largest of the server clock and every hw, so the rotation
-- never steps back behind a generation already made; within that, a
-- backwards step of the clock is no elapsed time for each cell (a cell
-- stamped after tm is not decayed, and keeps its stamp), which can only
-- over-estimate. (hw is not raised by every write: that was one more
-- SETRANGE per call, for no guarantee the stamps do not already give.)
-- The waits a call answers (retry, reset) count from the clock, not
-- from tm: tm - now ms longer when the clock is behind an hw.
-- With rotation, the generation a ring slot holds is the one live at its
-- hw: of the G generations live then, exactly one is congruent to the
-- slot mod G. A slot holding a generation that is no longer live is reset
-- (deleted and created again) by the first write that finds it so. The
-- strings carry no TTL, so volatile-* eviction policies never evict them.
--
-- Reply: one string of 25 bytes, struct '<Bddd': allowed (0/1),
-- estimate, retry ms, reset ms (whole numbers). retry and reset are -1
-- unless kind is "linear" (the limiter reading). (One bulk string costs the
-- server less than a table of four: about 0.7 us a call.)

local MAGIC = 'GRDGSK01'
local HDR = 40
-- Library functions, bound by the first call: a library's load-time
-- environment has only the redis registration API, not math or struct.
local frexp, ldexp, ceil, floor, exp, spack, sunpack, HUGE

-- Per-call parameters, set at the start of each call by run.
local op, L, M, G, fp, P, param, lo, hi, kind, agg, HS, HE
-- CFGS[cfg]: the decoded configuration and what derives from it (at most
-- 64 kept; more are dropped all at once).
local CFGS, NCFGS = {}, 0
local KINDS, AGGS = { [0] = 'none', 'exponential', 'linear' }, { [0] = 'min', 'max', 'mean' }
local delta, limit, rebaseAt, now, SIZE
-- pos[i], fin[i]: level i's cell as GETRANGE/SETRANGE arguments (reused
-- across calls; only 1..L are read).
local pos, fin = {}, {}
-- Scratch tables, reused by every call (only 1..L are read): the decayed
-- values and stamps of the generation being read, the committed values
-- and stamps of the oldest one, and the live generations.
local V, ST, AFTER, AST, LIVE, SLOTS = {}, {}, {}, {}, {}, {}
-- RAW: the stored scores of the last read (beside ST, its stamps); VR:
-- scratch for estAt.
local RAW, VR = {}, {}
-- GEN[slot]: the table open fills for a call's slot-th live generation.
local GEN = {}
local function gen(slot, k, epoch, hw)
  local g = GEN[slot]
  if not g then g = {}; GEN[slot] = g end
  g.k, g.epoch, g.hw = k, epoch, hw
  return g
end

-- offset returns level i's cell offset (for error messages).
local function offset(i) return (tonumber(pos[i]) - HDR) / 8 end

local function fail(msg)
  return redis.error_reply('ERR grudge: ' .. msg)
end

-- twoProd returns a x b rounded and its exact error (Dekker's product,
-- Veltkamp's split: the fused multiply-add Lua lacks), for |a|, |b|
-- below 2^996.
local SPLIT = 134217729 -- 2^27 + 1
local function twoProd(a, b)
  local p = a * b
  local t = SPLIT * a
  local ah = t - (t - a)
  local al = a - ah
  t = SPLIT * b
  local bh = t - (t - b)
  local bl = b - bh
  return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl
end

-- nextUp returns the float64 just above w (math.Nextafter(w, +Inf)).
local function nextUp(w)
  if w == 0 then return ldexp(1, -1074) end
  local m, e = frexp(w) -- w = m x 2^e, 0.5 <= |m| < 1
  if m == -0.5 then e = e - 1 end -- toward 0 from a power of two: the finer binade
  if e - 53 < -1074 then return w + ldexp(1, -1074) end
  return w + ldexp(1, e - 53)
end

-- addUp is the Go law's addUp: the least float64 at or above v + c (c >
-- 0), c widened by 2^-50 of itself and of delta.
local function addUp(v, c, delta)
  c = c + (c + math.abs(delta)) * 2 ^ -50
  local w = v + c
  if math.abs(v) < c or c - (w - v) > 0 then return nextUp(w) end
  return w
end

-- decay returns score after dt ms under the law (dt <= 0: unchanged).
-- The linear law is the Go engine's (internal/law: linearAt), bit for
-- bit (ages here are below 2^53 ms, so linearAt's rounding of longer
-- ones never applies): the drop rate x dt / 1000 as float64 computes it, its two
-- roundings' exact errors (delta), and the result rounded toward +Inf,
-- never below the exact drain (audit 86). (Past rate x dt = 2^996, a rate
-- above 1e290, the split overflows and delta is left 0: there the Go law
-- may step a result one ulp further.)
local function decay(s, dt)
  if dt <= 0 or s == 0 then return s end
  if kind == 'exponential' then
    return s * exp(-param * dt / 1000)
  elseif kind == 'linear' then
    if param < 2 ^ -900 then
      -- linearAt's tinyLinearAt (stop 59): the error terms below would
      -- underflow, so the drop is taken two steps short (a positive
      -- score) or long (a negative one) and the result stepped up.
      local drop = param * dt / 1000
      if s > 0 then
        for _ = 1, 2 do
          if drop > 0 then drop = -nextUp(-drop) end
        end
        local v = nextUp(s - drop)
        if v > s then v = s end
        if v <= 0 then return 0 end
        return v
      end
      drop = nextUp(nextUp(drop))
      local v = nextUp(s + drop)
      if v >= 0 then return 0 end
      return v
    end
    local p, e1 = twoProd(param, dt)
    local drop = p / 1000
    local p2, e = twoProd(drop, 1000)
    local delta = (e1 + ((p - p2) - e)) * 0.001
    if not (math.abs(p) < 2 ^ 996) then
      delta = 0 -- beyond the split (a rate near MaxFloat64): the plain drop, past any cell's score
    end
    if s > 0 then
      local v = s - drop
      local c = ((s - v) - drop) - delta
      if c > 0 then
        v = addUp(v, c, delta)
        if v > s then v = s end
      end
      if v <= 0 then return 0 end
      return v
    end
    local v = s + drop
    local c = (drop - (v - s)) + delta
    if c > 0 then v = addUp(v, c, delta) end
    if v >= 0 then return 0 end
    return v
  end
  return s
end


-- roundUp narrows x (already clamped to [lo, hi], float32 values) to the
-- float32 at or above it, as atomiccell.RoundUp does: a float32 has a
-- 24-bit significand, so with x = m * 2^e (0.5 <= |m| < 1) its quantum
-- is 2^(e-24), 2^-149 below the normal range. Exact arithmetic (scaling
-- by powers of two and ceil), and cheaper than packing, unpacking and
-- stepping the bits (checked equal on 187,000 values, subnormals and the
-- float32 extremes included).
--
-- With err, x + err is the exact value (|err| at most half a double ulp
-- of x, addUp's TwoSum): where x is on the float32 grid (ceil has nothing
-- to step over) and err > 0, the result steps one float32 up: from -2^k
-- toward zero that is half the quantum of -2^k's binade, the one below
-- being as fine (unless subnormal), and from -2^-149 it is -0, as the Go
-- engine's step of the bits gives.
local function roundUp(x, err)
  if x == 0 then return x end
  local _, e = frexp(x)
  if e < -125 then e = -125 end
  local y = ldexp(x, 24 - e)
  local c = ceil(y)
  if c == y and err and err > 0 then
    if y == -8388608 and e > -125 then c = y + 0.5 else c = y + 1 end
    if c == 0 then return -1 / HUGE end
  end
  return ldexp(c, e - 24)
end

-- addUp is what an add stores, as the Go engine's Rules.RoundSum: the
-- least float32 at or above the exact a + d, clamped to [lo, hi]. Lua
-- adds doubles rounded to nearest, so s = a + d may be below the exact
-- sum (a d below half a double ulp of a vanishes in it); TwoSum gives the
-- error (a + d = s + err exactly), and roundUp steps over it.
local function addUp(a, d)
  local s = a + d
  if s < lo then
    return roundUp(lo)
  elseif s >= hi then
    return roundUp(hi)
  end
  local bb = s - a
  return roundUp(s, (a - (s - bb)) + (d - bb))
end

-- pack rounds x up to float32 and packs the cell.
local function pack(x, stamp)
  return spack('<I4f', stamp, roundUp(x))
end

local function clamp(x)
  if x < lo then return lo end
  if x > hi then return hi end
  return x
end

-- create makes k a fresh generation string (all cells 0, stamp 0) at time
-- tm and returns its table (GEN[slot], reused). k must not exist.
local function create(slot, k, tm)
  redis.call('SETRANGE', k, SIZE - 1, '\0')
  redis.call('SETRANGE', k, '0', MAGIC .. spack('<I4I4I4I4dd', L, M, fp, 0, tm, tm))
  return gen(slot, k, tm, tm)
end

-- open returns the generation table for key k (GEN[slot], reused), nil
-- when k does not exist, or an error string for foreign data.
local function open(slot, k)
  -- The header as the first 40 of the string's last SIZE bytes: exactly
  -- 40 bytes, from offset 0, only when the string has SIZE bytes (fewer
  -- give a shorter answer, more give bytes from inside the cells, no
  -- header), so one GETRANGE checks the size too. Anything else, a
  -- missing key or another type included, takes the slow path.
  local h = redis.pcall('GETRANGE', k, HS, HE)
  if type(h) ~= 'string' or #h ~= HDR or string.sub(h, 1, 8) ~= MAGIC then
    local n = redis.pcall('STRLEN', k)
    if type(n) == 'table' then
      -- Not a string: STRLEN answered WRONGTYPE.
      return 'key ' .. k .. ' holds a ' .. redis.call('TYPE', k)['ok'] .. ', not a sketch'
    end
    if n == 0 and redis.call('EXISTS', k) == 0 then return nil end
    if n ~= SIZE then
      return 'key ' .. k .. ' holds ' .. n .. ' bytes, not a sketch of ' .. SIZE
    end
    return 'key ' .. k .. ' holds foreign data (bad magic)'
  end
  local hl, hm, hf, _, ep, hw = sunpack('<I4I4I4I4dd', h, 9)
  if hl ~= L or hm ~= M then
    return 'key ' .. k .. ' is a sketch of L=' .. hl .. ' M=' .. hm .. ', not L=' .. L .. ' M=' .. M
  end
  if hf ~= fp then return 'key ' .. k .. ' was built with another configuration (fingerprint ' .. hf .. ')' end
  if ep ~= ep or hw ~= hw or ep < 0 or hw < ep then return 'key ' .. k .. ' has a corrupt header' end
  return gen(slot, k, ep, hw)
end

-- read returns the decayed score of each of the key's cells in g at time
-- tm, plus the raw stamps, or an error string.
-- The answer is in the scratch tables V and ST, valid until the next read.
local function read(g, tm)
  local v, st = V, ST
  local rel = tm - g.epoch
  for i = 1, L do
    local c = redis.call('GETRANGE', g.k, pos[i], fin[i])
    local stamp, s = sunpack('<I4f', c)
    if s ~= s or s == HUGE or s == -HUGE then
      return 'key ' .. g.k .. ' has a corrupt cell at offset ' .. offset(i)
    end
    st[i] = stamp
    RAW[i] = s
    v[i] = decay(s, rel - stamp)
  end
  return v, st
end

-- aggregate combines the level scores v, each capped at hi: a cell at
-- the clamp of a hi no float32 holds stores the float32 just above it,
-- and reads (the estimate, the decision) cap it back, as the in-process
-- sketch does, which never reads below a key's true score.
local function aggregate(v)
  local r
  if agg == 'mean' then
    r = 0
    for i = 1, L do
      local x = v[i]
      if x > hi then x = hi end
      r = r + x / L
    end
    -- The sum of L capped terms can round one ulp above hi.
    if r > hi then r = hi end
    return r
  end
  r = v[1]
  if agg == 'max' then
    for i = 2, L do if v[i] > r then r = v[i] end end
  else
    for i = 2, L do if v[i] < r then r = v[i] end end
  end
  if r > hi then r = hi end
  return r
end

-- cellRebase returns a cell's decayed value at rel ms past its
-- generation's epoch, its stamp relative to tm (0 unless it is stamped
-- after tm), and how many ms to stamp it back (see rebase), or an error.
local function cellRebase(k, body, i, rel, maxBack)
  local stamp, s = struct.unpack('<I4f', body, i * 8 + 1)
  if s ~= s or s == math.huge or s == -math.huge then
    return nil, 'key ' .. k .. ' has a corrupt cell at offset ' .. i
  end
  -- A cell stamped after tm (the clock stepped back) keeps its value
  -- and its stamp, relative to the new epoch: ns > 0, back 0.
  local ns = stamp - rel
  local v = clamp(decay(s, rel - stamp))
  local back = 0
  if ns < 0 then
    ns = 0
    if kind == 'linear' and v > 0 then
      local f = roundUp(v)
      if f > v then
        back = floor((f - v) * 1000 / param)
        if back > maxBack then back = maxBack end
        while back > 0 and not (decay(f, back) >= v) do back = back - 1 end
      end
    end
  end
  return v, ns, back
end

-- rebase moves g's epoch to (about) tm, so that stamps (uint32 ms) never
-- wrap: every cell is decayed to tm (one stamped after tm keeps its value
-- and its time). It costs one pass over the L*M cells, once per rebaseAt
-- ms of a generation's life (never, when G*P < rebaseAt).
-- The decayed value v is stored rounded up to float32, f >= v. Under the
-- linear law such a cell would then read f - drain at every later time,
-- up to one float32 step of the debt above v - drain: a wait answered
-- before the rebase (a RetryAfter) would come out early by that step over
-- the rate (122 ms for a debt near 1000 at 5e-4/s). So, as the local
-- sketch's horizon sweep does (atomiccell's Rules.Rebase), such a cell is
-- stamped back by the whole ms the law takes to drain f - v: it reads v
-- at tm and after, never less, and above v - drain by less than 1 ms of
-- drain. The epoch moves to tm - B, B the largest back-dating (capped at
-- rebaseAt / 2, so the next rebase stays rebaseAt / 2 away), and a cell
-- is stamped B - back.
local function rebase(g, tm)
  local rel = tm - g.epoch
  local body = redis.call('GETRANGE', g.k, HDR, SIZE - 1)
  local maxBack = floor(rebaseAt / 2)
  local n = L * M
  -- Two passes (the largest back-dating first), rather than a table of
  -- 3*L*M numbers: a rebase runs once per rebaseAt ms.
  local B = 0
  for i = 0, n - 1 do
    local v, ns, back = cellRebase(g.k, body, i, rel, maxBack)
    if v == nil then return ns end
    if back > B then B = back end
  end
  local out = {}
  for i = 0, n - 1 do
    local v, ns, back = cellRebase(g.k, body, i, rel, maxBack)
    out[i + 1] = pack(v, ns + B - back)
  end
  redis.call('SETRANGE', g.k, HDR, table.concat(out))
  redis.call('SETRANGE', g.k, '24', struct.pack('<dd', tm - B, tm))
  g.hw = tm
  g.epoch = tm - B
  return nil
end

-- estAt is the estimate a read r ms after a read at rel ms past its
-- generation's epoch computes from the stored cells (raw, st): the
-- expression a later call evaluates, rounding included.
local function estAt(raw, st, rel, r)
  for i = 1, L do VR[i] = decay(raw[i], rel + r - st[i]) end
  return aggregate(VR)
end

-- fits reports whether the cells (raw, st) read r ms after rel leave
-- room for n within limit (nil n: whether the estimate is down to 0).
local function fits(n, raw, st, rel, r)
  local e = estAt(raw, st, rel, r)
  if n == nil then return not (e > 0) end
  return e + n <= limit
end

-- settle returns the least whole ms r >= 0 at which fits(n, ...) holds,
-- which it does from some ms on (the scores drain toward 0, and the
-- limiter's are >= 0), from the guess r (the closed form on the decayed
-- aggregate): galloping from it either way (1, 2, 4, ... ms) to a bracket,
-- then bisection. A guess a ms off (the quotient's rounding) costs two
-- evaluations; a far one (a cell stamped after rel, the clock having
-- stepped back behind a write, up to 2^32 ms away; a cell holding the
-- float32 above a Hi no float32 holds, whose drain the capped aggregate
-- understates) costs twice its distance's log2. A wait of BIG ms or more
-- (a law that drains Hi in more than 142,000 years: the ms would no
-- longer be exact in a float64) is none: -1.
local BIG = 2 ^ 52
local function settle(r, n, raw, st, rel)
  if not (r < BIG) then return -1 end -- NaN included
  if r < 0 then r = 0 end
  local a, b -- fits(n, .., a) fails (a = -1: none below 0), fits(.., b) holds
  if fits(n, raw, st, rel, r) then
    b, a = r, -1
    local d = 1
    while b - d >= 0 do
      if not fits(n, raw, st, rel, b - d) then a = b - d; break end
      b, d = b - d, d * 2
    end
  else
    a = r
    local d = 1
    while true do
      if a + d >= BIG then return -1 end
      if fits(n, raw, st, rel, a + d) then b = a + d; break end
      a, d = a + d, d * 2
    end
  end
  while b - a > 1 do
    local m = floor((a + b) / 2)
    if fits(n, raw, st, rel, m) then b = m else a = m end
  end
  return b
end

-- retryReset returns the waits of the linear law (-1, -1 for the other
-- laws) for the cells (raw, st) read at rel ms past their generation's
-- epoch, whose aggregate is e: the least whole ms after which a request
-- of n fits within limit (-1 if n can never fit; nil n: not asked), and
-- the least after which the estimate is down to 0, each as a later call
-- evaluates the cells (estAt).
local function retryReset(e, n, rel, raw, st)
  if kind ~= 'linear' then return -1, -1 end
  local reset = settle(ceil(e / param * 1000), nil, raw, st, rel)
  if n == nil or n > limit then return -1, reset end -- not asked, or n never fits
  local need = e + n - limit
  if need <= 0 then return 0, reset end
  return settle(ceil(need / param * 1000), n, raw, st, rel), reset
end

-- rebaseSoon returns the ms from tm to the earliest time a rebase of a
-- generation that may answer a later call can come (0 if one is due
-- now), or nil if none can: a live generation g is rebased by a write at
-- g.epoch + rebaseAt or later, a generation made later at least rebaseAt
-- after it is made, and none while G*P < rebaseAt (each lives G*P ms).
local function rebaseSoon(live, tm)
  if P > 0 and G * P < rebaseAt then return nil end
  local soon = rebaseAt -- a generation made from tm on
  for _, g in ipairs(live) do
    local d = g.epoch + rebaseAt - tm
    if d < soon then soon = d end
  end
  if soon < 0 then soon = 0 end
  return soon
end

-- rebaseSlack returns w (a wait in ms from tm, answered from the cells raw)
-- made later by 1 ms for each rebase that can come before tm + w, so that
-- it is never early across them: a rebase stores a cell rounded up to
-- float32 and stamped back by whole ms of drain, which leaves up to 1 ms
-- of drain in it, one more at each rebase, unless the cell holds a whole
-- number of units at most 2^24 under a whole drain a ms (exact units:
-- the rounding is none). The first rebase comes soon ms from tm at the
-- earliest (rebaseSoon; nil: never) and each later one at least
-- rebaseAt/2 after the one before (the epoch moves back by at most
-- rebaseAt/2). A rebase at tm + w itself comes after that call's read.
local function rebaseSlack(w, soon, raw)
  if soon == nil or not (w > soon) then return w end
  local d = param / 1000
  local lossy = d ~= floor(d)
  for i = 1, L do
    local s = raw[i]
    if s ~= floor(s) or s > 16777216 then lossy = true end
  end
  if not lossy then return w end
  local half = floor(rebaseAt / 2)
  if half < 1 then half = 1 end
  local k = 0
  for _ = 1, 2 do -- the slack may itself reach past one more rebase
    k = 1 + floor((w + k - 1 - soon) / half)
  end
  return w + k
end

-- later returns the wait w (ms, -1 for none) made lag ms longer, at most
-- 2^53 - 1 (the client saturates it at the largest Duration); a wait of 0
-- (the request fits now, the debt is 0) stays 0.
local MAXW = 2 ^ 53 - 1
local function later(w, lag)
  if w <= 0 then return w end
  w = w + lag
  if w > MAXW then return MAXW end
  return w
end

-- check returns the commands the ACL denies this function on keys, as
-- "COMMAND key" strings (empty: none).
local function check(keys)
  local denied = {}
  if not redis.acl_check_cmd('TIME') then denied[#denied + 1] = 'TIME' end
  for _, k in ipairs(keys) do
    for _, c in ipairs({
      { 'GETRANGE', k, '0', '0' }, { 'SETRANGE', k, '0', 'x' }, { 'STRLEN', k },
      { 'EXISTS', k }, { 'TYPE', k }, { 'DEL', k },
    }) do
      if not redis.acl_check_cmd(unpack(c)) then denied[#denied + 1] = c[1] .. ' ' .. k end
    end
  end
  return denied
end

-- run is one call: FCALL grudge_LIBVERSION G keys... ARGV...
local function run(KEYS, ARGV)
  if not spack then
    frexp, ldexp, ceil, floor, exp = math.frexp, math.ldexp, math.ceil, math.floor, math.exp
    spack, sunpack, HUGE = struct.pack, struct.unpack, math.huge
  end
  op = ARGV[1]
  if op == 'C' then return check(KEYS) end
  local c = CFGS[ARGV[2]]
  if not c then
    local l, m, g, f, p, pa, lo_, hi_, k, a = sunpack('<I4I4I4I4ddddBB', ARGV[2])
    if not KINDS[k] or not AGGS[a] then return fail('bad configuration argument') end
    local size = HDR + l * m * 8
    -- The header's range counted from the end (see open).
    c = { l, m, g, f, p, pa, lo_, hi_, KINDS[k], AGGS[a], tostring(-size), tostring(-(size - HDR + 1)), size }
    if NCFGS >= 64 then CFGS, NCFGS = {}, 0 end
    CFGS[ARGV[2]], NCFGS = c, NCFGS + 1
  end
  L, M, G, fp, P, param, lo, hi, kind, agg, HS, HE, SIZE =
    c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13]
  delta, limit, rebaseAt = sunpack('<ddd', ARGV[3])
  if ARGV[4] == '' then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  else
    now = tonumber(ARGV[4])
  end
  for i = 1, L do pos[i], fin[i] = ARGV[3 + 2 * i], ARGV[4 + 2 * i] end

  -- The generations live now: one key, or the G ring slots' generations
  -- cur-G+1 .. cur, oldest first. The rotation never steps back: tm is
  -- the largest of the server clock and every generation's creation time.
  if #KEYS ~= (P == 0 and 1 or G) then
    return fail('got ' .. #KEYS .. ' keys; the sketch has ' .. (P == 0 and 1 or G))
  end
  local write = op ~= 'Q'
  local live = LIVE
  for i = #live, 1, -1 do live[i] = nil end
  local tm = now
  if P == 0 then
    local g = open(1, KEYS[1])
    if type(g) == 'string' then return fail(g) end
    if g then
      if g.hw > tm then tm = g.hw end
    elseif write then
      g = create(1, KEYS[1], tm)
    end
    if g then live[1] = g end
  else
    local slots = SLOTS
    for s = 1, G do
      local g = open(s, KEYS[s])
      if type(g) == 'string' then return fail(g) end
      slots[s] = g or false
      if g and g.hw > tm then tm = g.hw end
    end
    local cur = floor(tm / P)
    for i = cur - G + 1, cur do
      local s = i % G + 1
      local g = slots[s]
      if g then
        -- The generation g holds: the one live at its hw that is
        -- congruent to its slot.
        local top = floor(g.hw / P)
        if top - (top - (s - 1)) % G ~= i then
          -- Stale: its generation's life is over.
          if write then
            -- create writes the string's last byte, which fails under a
            -- proto-max-bulk-len lowered below the string's size: probe
            -- that write on the stale string first (its content goes
            -- next), so such a call fails before the DEL, having
            -- written nothing.
            redis.call('SETRANGE', g.k, SIZE - 1, '\0')
            redis.call('DEL', g.k)
            g = create(s, KEYS[s], tm)
          else
            g = nil
          end
        end
      elseif write then
        g = create(s, KEYS[s], tm)
      end
      if g then live[#live + 1] = g end
    end
  end

  if #live == 0 then
    -- A query of a sketch nobody has written: every score is 0.
    return spack('<Bddd', 0, 0, -1, -1)
  end

  -- The oldest live generation answers; all of them are written.
  local rg = live[1]
  local v, st = read(rg, tm)
  if type(v) == 'string' then return fail(v) end
  local est = aggregate(v)


  -- retry and reset are waits from now, the caller's clock: the call
  -- ran at tm, which lies lag ms after now when the clock is behind a
  -- generation's hw (it stepped back), and a later call runs at tm until
  -- the clock passes it, so a wait from tm is a wait of lag more from now.
  local lag = tm - now

  local rel = tm - rg.epoch
  if op == 'Q' then
    local _, reset = retryReset(est, nil, rel, RAW, st)
    reset = rebaseSlack(reset, rebaseSoon(live, tm), RAW)
    return spack('<Bddd', 1, est, -1, later(reset, lag))
  end

  if op == 'T' and not (est + delta <= limit) then
    local retry, reset = retryReset(est, delta, rel, RAW, st)
    local soon = rebaseSoon(live, tm)
    retry, reset = rebaseSlack(retry, soon, RAW), rebaseSlack(reset, soon, RAW)
    return spack('<Bddd', 0, est, later(retry, lag), later(reset, lag))
  end

  -- Commit delta to the key's cells in every live generation (a read of
  -- a later generation reuses V and ST: the oldest's are no longer
  -- needed by then).
  --
  -- All or nothing: Redis does not roll a function back, and a SETRANGE
  -- fails when its end passes proto-max-bulk-len, which may have been
  -- lowered (CONFIG SET, or a promoted replica's setting) below a string
  -- that already exists. So every due rebase (a whole-body write, and
  -- harmless alone: it only re-stamps) runs before any cell is written,
  -- and each generation's cells are written from the last level down:
  -- level L's cell has the highest offset of the call (the generations
  -- share the layout), so if its write succeeds every later one does,
  -- and if it fails nothing of the call was written.
  local rebased = false -- the oldest generation (whose v, st were read)
  for gi, g in ipairs(live) do
    if tm - g.epoch >= rebaseAt then
      local err = rebase(g, tm)
      if err then return fail(err) end
      if gi == 1 then rebased = true end
    end
  end
  local after, arel = AFTER, rel
  for gi, g in ipairs(live) do
    local rel = tm - g.epoch
    if gi == 1 then arel = rel end
    local gv, gst
    if gi == 1 and not rebased then
      gv, gst = v, st
    else
      gv, gst = read(g, tm)
      if type(gv) == 'string' then return fail(gv) end
    end
    for i = L, 1, -1 do
      local stamp = gst[i]
      if rel > stamp then stamp = rel end
      local r = addUp(gv[i], delta)
      local c = spack('<I4f', stamp, r)
      redis.call('SETRANGE', g.k, pos[i], c)
      if gi == 1 then after[i], AST[i] = r, stamp end
    end
  end

  local ea = aggregate(after)
  if op == 'T' then
    local _, reset = retryReset(ea, nil, arel, after, AST)
    reset = rebaseSlack(reset, rebaseSoon(live, tm), after)
    return spack('<Bddd', 1, ea, 0, later(reset, lag))
  end
  return spack('<Bddd', 1, ea, -1, -1)
end

redis.register_function('grudge_LIBVERSION', run)
