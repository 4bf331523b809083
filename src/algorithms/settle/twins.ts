/**
 * The in-memory twins of the settle bodies (`settle/*.lua`): each mirrors its Lua line for
 * line (same integer arithmetic, same reply), run by `MemoryStore` for reserve, settle,
 * refund and charge.
 */
import { ceilDiv, floorDiv } from '../int-math.js';
import { intIn, luaNumber, numbers, type TwinState } from '../twin.js';

/**
 * A settle body's twin: with `delta` undefined, the mark of the state now; else the units
 * moved (signed) and the units left, `mark` the state a reservation came from (undefined:
 * the state now), `cost` the reservation's units (a refund's or a charge's own); `[0, 0, 1]`
 * when `mark` or `cost` is not one the state could have given (a hand edit: unknown).
 */
export type SettleTwin = (
  state: TwinState,
  key: string,
  args: readonly string[],
  delta: number | undefined,
  mark: number | undefined,
  cost: number,
) => number | [applied: number, remaining: number, unknown?: 1];

/** `at`: PEXPIRETIME of a key (−2 absent, −1 without expiry). */
function expireTime(state: TwinState, key: string): number {
  const ttl = state.pttl(key);
  return ttl < 0 ? ttl : state.nowMs + ttl;
}

export const fixedWindowSettle: SettleTwin = (state, key, args, delta, mark, cost) => {
  const [limit, window] = numbers(args, 3);
  if (delta === undefined) return expireTime(state, key);
  if (mark !== undefined && (mark > state.nowMs + window || cost > limit)) return [0, 0, 1];
  const current = state.get<unknown>(key, 'string');
  let used: number | undefined;
  if (current !== undefined) {
    const text = String(current);
    if (text.length <= 16 && /^(0|[1-9][0-9]*)$/.test(text)) used = Number(text);
    if (used !== undefined && used > limit) used = undefined;
    if (used === undefined) return [0, 0];
  }
  const at = expireTime(state, key);
  if (mark !== undefined && at !== mark) return [0, limit - (used ?? 0)];
  if (used === undefined && delta < 0) return [0, limit];
  const before = used ?? 0;
  const after = Math.min(Math.max(before + delta, 0), limit);
  if (after !== before) {
    if (current === undefined) state.set(key, 'string', after, window);
    else {
      state.update(key, after);
      const ttl = state.pttl(key);
      if (ttl < 0 || ttl > window) state.pexpire(key, window);
    }
  }
  return [after - before, limit - after];
};

interface Bucket {
  readonly s: unknown;
  readonly t: unknown;
}

export const tokenBucketSettle: SettleTwin = (state, key, args, delta, mark, cost) => {
  const [capacity, rate, interval] = numbers(args, 3);
  const now = state.nowMs;
  const full = capacity * interval;
  const horizon = ceilDiv(full, rate);
  const bucket = state.get<Bucket>(key, 'hash');
  const s = luaNumber(bucket?.s);
  const t = luaNumber(bucket?.t);
  let scaled = full;
  let stamp = now;
  if (intIn(s, 0, full) && intIn(t, 0, now + horizon)) {
    if (t > now) {
      stamp = t;
      scaled = s;
    } else scaled = Math.min(s + (now - t) * rate, full);
  } else if (bucket !== undefined && (bucket.s !== undefined || bucket.t !== undefined)) {
    return delta === undefined ? 0 : [0, 0];
  }
  if (delta === undefined) return stamp + ceilDiv(full - scaled, rate);
  if (mark !== undefined && (mark > stamp + horizon || cost > capacity)) return [0, 0, 1];
  let moved: number;
  let applied: number;
  if (delta < 0) {
    let owed = full - scaled;
    if (mark !== undefined) {
      owed = Math.min(owed, cost * interval, Math.max(0, (mark - stamp) * rate));
    }
    moved = Math.min(-delta * interval, owed);
    applied = -floorDiv(moved, interval);
  } else {
    moved = -Math.min(delta * interval, scaled);
    applied = floorDiv(-moved, interval);
  }
  if (moved !== 0) {
    scaled += moved;
    const reset = ceilDiv(full - scaled, rate) + (stamp - now);
    state.set(key, 'hash', { s: scaled, t: stamp }, Math.min(Math.max(reset, 1), horizon));
  }
  return [applied + 0, floorDiv(scaled, interval)];
};

const msUp = (us: number) => (us <= 0 ? 0 : floorDiv(us + 999, 1000));

export const gcraSettle: SettleTwin = (state, key, args, delta, mark, cost) => {
  const [interval, burst] = numbers(args, 3);
  const now = state.nowUs;
  const tolerance = burst * interval;
  const value = state.get<unknown>(key, 'string');
  let tat = luaNumber(value);
  if (value !== undefined && !intIn(tat, 0, now + 2 * tolerance)) {
    return delta === undefined ? 0 : [0, 0];
  }
  if (delta === undefined) return tat ?? 0;
  if (mark !== undefined && (mark > now + tolerance || cost > burst)) return [0, 0, 1];
  tat = Math.max(tat ?? 0, now);
  let moved = 0;
  let applied = 0;
  if (delta < 0) {
    let pending = tat - now;
    if (mark !== undefined) pending = Math.min(pending, cost * interval, Math.max(0, mark - now));
    moved = -Math.min(-delta * interval, pending);
    applied = -floorDiv(-moved, interval);
  } else if (tat < now + tolerance) {
    moved = Math.min(delta * interval, now + tolerance - tat);
    applied = floorDiv(moved, interval);
  }
  if (moved !== 0) {
    tat += moved;
    if (tat > now) state.set(key, 'string', tat, Math.min(msUp(tat - now), msUp(tolerance)));
    else state.delete(key);
  }
  return [applied + 0, Math.max(floorDiv(tolerance - (tat - now), interval), 0)];
};

interface Counter {
  readonly w: unknown;
  readonly c: unknown;
  readonly p: unknown;
}

export const slidingWindowCounterSettle: SettleTwin = (state, key, args, delta, mark, cost) => {
  const [limit, window] = numbers(args, 3);
  const now = state.nowMs;
  const horizon = 2 * window;
  let index = floorDiv(now, window);
  let elapsed = now - index * window;
  const hash = state.get<Counter>(key, 'hash');
  const stored = luaNumber(hash?.w);
  const c = luaNumber(hash?.c);
  const p = luaNumber(hash?.p);
  const valid =
    intIn(stored, 0, Number.MAX_SAFE_INTEGER) &&
    stored * window <= now + horizon &&
    intIn(c, 0, limit) &&
    intIn(p, 0, limit);
  const fields =
    hash !== undefined && (hash.w !== undefined || hash.c !== undefined || hash.p !== undefined);
  if (!valid && fields) return delta === undefined ? -1 : [0, 0];
  if (delta === undefined) return valid ? (stored as number) : -1;
  if (valid && (stored as number) > index) {
    index = stored as number;
    elapsed = 0;
  }
  if (mark !== undefined && (mark > index || cost > limit)) return [0, 0, 1];
  let current = 0;
  let previous = 0;
  if (valid) {
    if (stored === index) {
      current = c as number;
      previous = p as number;
    } else if (stored === index - 1) previous = c as number;
  }
  let applied = 0;
  if (!(mark !== undefined && mark !== index) && !(delta < 0 && current === 0)) {
    const after = Math.min(Math.max(current + delta, 0), limit);
    applied = after - current;
    current = after;
    if (applied !== 0) {
      state.set(
        key,
        'hash',
        { w: index, c: current, p: previous },
        Math.min((index + 2) * window - now, horizon),
      );
    }
  }
  const room = limit * window - previous * (window - elapsed) - current * window;
  return [applied, Math.max(floorDiv(room, window), 0)];
};
