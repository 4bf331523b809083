/**
 * The in-memory twins of the settle bodies (`settle/*.lua`): each mirrors its Lua line for
 * line (same integer arithmetic, same reply), run by `MemoryStore` for reserve, settle,
 * refund and charge.
 */
import { ceilDiv, floorDiv } from '../int-math.js';
import {
  countUpTo,
  TRIM as LOG_TRIM,
  type LogEntry,
  memberOf,
  parseEntry,
  zadd,
} from '../sliding-window-log.js';
import { intIn, luaNumber, numbers, type TwinState } from '../twin.js';

/**
 * A settle body's twin: with `delta` undefined, the mark of the state now; else the units
 * moved (signed) and the units left, `mark` the state a reservation came from (undefined:
 * the state now), `cost` the reservation's units (a refund's or a charge's own); `[0, 0, 1]`
 * when `mark` or `cost` is not one the state could have given (a hand edit: unknown). A
 * give-back against a mark (a refund) of a token bucket or GCRA also answers
 * `[…, 0, mark', spent]`: the mark once the units given back are out of it, and the units of
 * the cost they used up (rounded up); the other bodies keep the mark and spend what they move.
 */
export type SettleTwin = (
  state: TwinState,
  key: string,
  args: readonly string[],
  delta: number | undefined,
  mark: number | undefined,
  cost: number,
) => number | [applied: number, remaining: number, unknown?: 0 | 1, mark?: number, spent?: number];

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
  if (mark !== undefined && delta < 0) {
    return [
      applied + 0,
      floorDiv(scaled, interval),
      0,
      mark - floorDiv(moved, rate),
      ceilDiv(moved, interval),
    ];
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
  const left = Math.max(floorDiv(tolerance - (tat - now), interval), 0);
  if (mark !== undefined && delta < 0) {
    return [applied + 0, left, 0, mark + moved, ceilDiv(-moved, interval)];
  }
  return [applied + 0, left];
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

/** As `read()` in `settle/sliding-window-log.lua`: the log now (trimmed), or undefined when foreign. */
function readLog(state: TwinState, key: string, limit: number, window: number, clockNow: number) {
  let log = state.get<LogEntry[]>(key, 'zset');
  const out = { log, now: clockNow, count: 0, total: 0, stale: 0, card: 0 };
  if (log === undefined || log.length === 0) return out;
  const newest = parseEntry(log[log.length - 1]);
  if (newest === undefined) return undefined;
  const [topTotal, , top] = newest;
  if (top > clockNow + window || top < 0) return undefined;
  out.total = topTotal;
  if (top > out.now) out.now = top;
  let stale = countUpTo(log, out.now - window);
  let card = log.length;
  if (stale > 0) {
    const removed = Math.min(stale, LOG_TRIM);
    log.splice(0, removed);
    if (log.length === 0) {
      state.delete(key);
      log = undefined;
    }
    stale -= removed;
    card -= removed;
  }
  out.log = log;
  out.stale = stale;
  out.card = card;
  if (stale === card) return out;
  const first = parseEntry((log as LogEntry[])[stale]);
  if (first === undefined || first[0] > out.total) return undefined;
  out.count = out.total - (first[0] - first[1]);
  return out.count <= limit ? out : undefined;
}

/** As `rewrite()` in `settle/sliding-window-log.lua`: the newest `m` members replaced by `add`, the TTL kept. */
function rewriteLog(
  state: TwinState,
  key: string,
  log: readonly LogEntry[],
  m: number,
  add: readonly LogEntry[],
  window: number,
): void {
  let ttl = state.pttl(key);
  if (ttl < 1 || ttl > window) ttl = window;
  const next = log.slice(0, log.length - m);
  for (const [score, member] of add) zadd(next, score, member);
  if (next.length === 0) state.delete(key);
  else state.set(key, 'zset', next, ttl);
}

export const slidingWindowLogSettle: SettleTwin = (state, key, args, delta, mark, cost) => {
  const [limit, window] = numbers(args, 3);
  if (delta === undefined) {
    const log = state.get<LogEntry[]>(key, 'zset');
    return log === undefined || log.length === 0 ? -1 : (log[log.length - 1] as LogEntry)[0];
  }
  const read = readLog(state, key, limit, window, state.nowMs);
  if (read === undefined) return [0, 0];
  const { log, now, count, total } = read;
  const none: [number, number] = [0, limit - count];
  const charge = (units: number): [number, number] => {
    const n = Math.min(units, limit - count);
    if (n <= 0) return none;
    const member = memberOf(total + n, n);
    if (state.pttl(key) === -2) state.set(key, 'zset', [[now, member]], window);
    else {
      zadd(log as LogEntry[], now, member);
      state.pexpire(key, window);
    }
    return [n, limit - count - n];
  };
  // A charge (no mark): a give-back always has one.
  if (mark === undefined) return delta > 0 ? charge(delta) : none;
  if (mark <= now - window) return none;
  if (cost === 0) return delta > 0 ? charge(delta) : none;
  if (log === undefined) return none;
  const from = log.findIndex((e) => e[0] >= mark);
  const reply = from < 0 ? [] : log.slice(from);
  let at: number | undefined;
  for (let j = 0; j < reply.length; j++) {
    const e = parseEntry(reply[j]);
    if (e !== undefined && e[2] === mark && e[1] === cost) {
      at = j;
      break;
    }
    if (e === undefined || e[2] !== mark) break;
  }
  if (at === undefined) return none;
  if (delta > 0) return charge(delta);
  const d = -delta;
  const add: LogEntry[] = [];
  let below: number | undefined;
  for (let j = at; j < reply.length; j++) {
    const e = parseEntry(reply[j]);
    if (e === undefined || (below !== undefined && e[0] <= below)) return none;
    const [t, n, s] = e;
    below = t;
    if (j === at) {
      if (d < n) add.push([s, memberOf(t - d, n - d)]);
    } else {
      if (t - d < n) return none;
      add.push([s, memberOf(t - d, n)]);
    }
  }
  rewriteLog(state, key, log, reply.length - at, add, window);
  return [-d + 0, limit - count + d];
};
