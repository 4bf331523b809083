/**
 * The in-memory twin of the priced operations of the batch script (`settle/priced.lua`):
 * reserve (`k`), settle (`s`), refund (`f`) and charge (`g`), each a scope item and its record
 * (a refund: then its anchor, the reservation and take records of its `takeId`).
 */
import type { ReadItem, ReplyWriter } from '../algorithms/batch-wire.js';
import { ALGORITHMS } from '../algorithms/registry.js';
import { settleOf } from '../algorithms/settle/registry.js';
import type { SettleTwin } from '../algorithms/settle/twins.js';
import { luaNumber, TAKE, type Twin, type TwinMode, type TwinState } from '../algorithms/twin.js';
import { StoreError } from '../errors.js';
import { decideItem, refusedBlock } from './block-twin.js';
import { replyErrorText } from './retry-safe-twin.js';

/** The operations this module runs. */
export const PRICED_OPS: ReadonlySet<string> = new Set(['k', 's', 'f', 'g', 'm']);

const DRY: TwinMode = { dry: true, probe: false };
const REPAIR: TwinMode = { dry: false, probe: true };

/** As `record_numbers` in `settle/priced.lua`: the record's integers; an untrusted one removed. */
function recordNumbers(state: TwinState, key: string): number[] | undefined {
  let text: unknown;
  let ok = true;
  try {
    text = state.get<unknown>(key, 'string');
  } catch {
    ok = false;
  }
  if (ok && text === undefined) return undefined;
  let out: number[] | undefined = ok && state.pttl(key) >= 0 ? [] : undefined;
  if (out !== undefined) {
    for (const part of String(text).split(',')) {
      if (part === '') continue;
      const x = luaNumber(part);
      if (x === undefined || !Number.isInteger(x)) {
        out = undefined;
        break;
      }
      out.push(x);
    }
  }
  if (out !== undefined && out.length > 0) return out;
  state.delete(key);
  return undefined;
}

const recordText = (values: readonly number[]) => values.map((v) => String(v)).join(',');

/** As `record_cap`: a record's TTL capped at `cap` ms. */
function recordCap(state: TwinState, key: string, cap: number): void {
  const left = state.pttl(key);
  if (left < 0 || left > cap) state.pexpire(key, cap);
}

const TOMBSTONE = '-1';

/** As `reservation` in `settle/priced.lua`. */
function reservation(state: TwinState, key: string): number[] | 'tombstone' | undefined {
  const rec = recordNumbers(state, key);
  if (rec === undefined) return undefined;
  if (rec.length === 1 && rec[0] === -1) return 'tombstone';
  const r = (j: number) => rec[j - 1] as number;
  let good = (rec.length === 9 && r(9) === 0) || (rec.length === 11 && r(9) === 1 && r(11) >= 0);
  if (good) {
    good =
      r(1) === 1 && r(2) >= 0 && r(3) >= 0 && r(4) === 0 && r(5) >= 0 && r(6) >= 0 && r(7) >= 0;
    good = good && r(8) >= 0;
  }
  if (good) return rec;
  state.delete(key);
  return undefined;
}

function settleTwinOf(scope: ReadItem) {
  const take = ALGORITHMS[scope.batchId - 1];
  const settle: SettleTwin | undefined = take && settleOf(take.script)?.twin;
  if (take === undefined || settle === undefined) {
    throw new StoreError('ERR reserve, settle, refund and charge do not support this algorithm');
  }
  return { take: take.twin, settle };
}

/** As `generation` in `settle/priced.lua`: the scope's generation; a reserve (`ttl`) keeps it. */
function generation(state: TwinState, key: string, ttl: number | undefined): number {
  const gkey = `${key}:g`;
  let g: number;
  try {
    g = luaNumber(String(state.get<unknown>(gkey, 'string') ?? '0')) ?? 0;
  } catch {
    g = 0;
  }
  if (!Number.isInteger(g) || g < 0) g = 0;
  if (ttl !== undefined) {
    if (g === 0) {
      g = state.nowUs;
      state.set(gkey, 'string', String(g), ttl);
    } else state.pexpire(gkey, ttl);
  }
  return g;
}

/** As `take_record` in `settle/priced.lua`: a take's record (op `i`), 8 numbers an item. */
function takeRecord(state: TwinState, key: string): number[] | undefined {
  let text: unknown;
  try {
    text = state.get<unknown>(key, 'string');
  } catch {
    return undefined;
  }
  if (text === undefined || state.pttl(key) < 0) return undefined;
  const out: number[] = [];
  for (const part of String(text).split(',')) {
    if (part === '') continue;
    const x = luaNumber(part);
    if (x === undefined || !Number.isInteger(x) || x < 0) return undefined;
    out.push(x);
  }
  const m = (out.length - 1) / 8;
  if (m < 1 || !Number.isInteger(m)) return undefined;
  for (let j = 0; j < 8 * m; j += 8) if (out[j] !== 1 || out[j + 3] !== 0) return undefined;
  return out;
}

type Adjust = (
  delta: number | undefined,
  mark: number | undefined,
  cost: number,
) => ReturnType<SettleTwin>;

/** As `give_back`: units moved, units of `left` spent, the mark after; undefined: untrusted. */
function giveBack(
  state: TwinState,
  scopeKey: string,
  adjust: Adjust,
  units: number,
  left: number,
  mark: number,
  gen: number,
): [moved: number, spent: number, mark: number] | undefined {
  const want = Math.min(units, left);
  if (want <= 0 || generation(state, scopeKey, undefined) !== gen) return [0, 0, mark];
  const r = adjust(-want, mark, left) as [number, number, number?, number?, number?];
  if (r[2] === 1) return undefined;
  return [r[0], r[4] ?? Math.max(-r[0], 0), r[3] ?? mark];
}

/** As `refund_anchor`: the units a refund moved from its anchor, undefined when unknown. */
function refundAnchor(
  state: TwinState,
  scope: ReadItem,
  adjust: Adjust,
  units: number,
  anchor: readonly ReadItem[],
  ttl: number,
): number | undefined {
  const [rsvItem, takeItem] = anchor as [ReadItem, ReadItem];
  const rsv = reservation(state, rsvItem.key);
  if (rsv === 'tombstone') return undefined;
  if (rsv !== undefined) {
    if (rsv[8] === 1) return 0;
    const got = giveBack(
      state,
      scope.key,
      adjust,
      units,
      rsv[4] as number,
      rsv[5] as number,
      rsv[6] as number,
    );
    if (got === undefined) {
      state.delete(rsvItem.key);
      return undefined;
    }
    const [moved, spent, mark] = got;
    if (spent > 0) {
      rsv[4] = (rsv[4] as number) - spent;
      rsv[5] = mark;
      state.update(rsvItem.key, recordText(rsv));
      recordCap(state, rsvItem.key, ttl);
    }
    return moved;
  }
  const take = takeRecord(state, takeItem.key);
  if (take === undefined) return undefined;
  const keyhash = Number(takeItem.args[1]);
  for (let at = 0; at + 8 <= take.length - 1; at += 8) {
    if (take[at + 6] !== keyhash) continue;
    const got = giveBack(
      state,
      scope.key,
      adjust,
      units,
      take[at + 7] as number,
      take[at + 4] as number,
      take[at + 5] as number,
    );
    if (got === undefined) return undefined;
    const [moved, spent, mark] = got;
    if (spent > 0) {
      take[at + 7] = (take[at + 7] as number) - spent;
      take[at + 4] = mark;
      state.update(takeItem.key, recordText(take));
    }
    return moved;
  }
  return undefined;
}

/**
 * As `take_marks` in `settle/priced.lua`: the mark and generation of each item of an admitted
 * take with an id (0, 0 for an algorithm without a settle body), the generation kept `ttl` ms.
 */
export function takeMarks(
  state: TwinState,
  items: readonly ReadItem[],
  ttl: number,
): readonly number[] {
  const out: number[] = [];
  for (const item of items) {
    const take = ALGORITHMS[item.batchId - 1];
    const settle = take && settleOf(take.script)?.twin;
    if (settle === undefined) {
      out.push(0, 0);
      continue;
    }
    const mark = Math.max(settle(state, item.key, item.args, undefined, undefined, 0) as number, 0);
    out.push(mark, generation(state, item.key, ttl));
  }
  return out;
}

/** As `left_now`: the units a peek reports now (a blocked scope: 0). */
function leftNow(state: TwinState, scope: ReadItem, take: Twin): number {
  const r = decideItem(state, scope.key, scope.args, take, DRY);
  return Math.max(r[1] as number, 0);
}

/** As `cancelled`: a reserve whose id was cancelled first, refused. */
function cancelled(state: TwinState, scope: ReadItem, take: Twin): readonly number[] {
  const r = decideItem(state, scope.key, scope.args, take, DRY);
  return [0, Math.max(r[1] as number, 0), r[2] as number, 0];
}

function request(
  state: TwinState,
  op: string,
  scope: ReadItem,
  record: ReadItem | undefined,
  anchor: readonly ReadItem[],
): [slots: readonly number[], replayed: number] {
  const { take, settle } = settleTwinOf(scope);
  const args = scope.args;
  const units = Number(args[args.length - 1]);
  const adjust = (delta: number | undefined, mark: number | undefined, cost: number) =>
    settle(state, scope.key, args, delta, mark, cost);
  const ttl = record === undefined ? undefined : Number(record.args[0]);
  const ask = record?.args[1];
  if (op === 'k') {
    const key = (record as ReadItem).key;
    const rec = reservation(state, key);
    if (rec === 'tombstone') return [cancelled(state, scope, take), 1];
    if (rec !== undefined) {
      if (rec[7] !== Number(ask)) return [[0, 0, 0, 0], 2];
      return [rec.slice(0, 4), 1];
    }
    const r = decideItem(state, scope.key, args, take, TAKE);
    if (r[0] === 1) {
      const mark = adjust(undefined, undefined, units) as number;
      const gen = generation(state, scope.key, ttl);
      state.set(key, 'string', recordText([...r, units, mark, gen, Number(ask), 0]), ttl);
    }
    return [r, 0];
  }
  if (op === 's') {
    const key = (record as ReadItem).key;
    const rec = reservation(state, key);
    if (rec === undefined && units === 0) state.set(key, 'string', TOMBSTONE, ttl);
    if (rec === undefined || rec === 'tombstone') {
      return [[0, 0, leftNow(state, scope, take), 0], 0];
    }
    if (rec[8] === 1) return [[1, rec[9] as number, leftNow(state, scope, take), 0], 1];
    const cost = rec[4] as number;
    const delta = generation(state, scope.key, undefined) === rec[6] ? units - cost : 0;
    const r = adjust(delta, rec[5], cost) as [number, number, 1?];
    if (r[2] === 1) {
      state.delete(key);
      if (units === 0) state.set(key, 'string', TOMBSTONE, ttl);
      return [[0, 0, leftNow(state, scope, take), 0], 0];
    }
    const left = leftNow(state, scope, take);
    state.update(key, recordText([...rec.slice(0, 8), 1, r[0], left]));
    recordCap(state, key, ttl as number);
    return [[1, r[0], left, 0], 0];
  }
  if (record !== undefined) {
    const rec = recordNumbers(state, record.key);
    if (
      rec !== undefined &&
      rec.length === 3 &&
      (rec[1] as number) >= 0 &&
      (rec[2] as number) >= 0
    ) {
      if (rec[2] !== Number(ask)) return [[0, 0, 0, 0], 2];
      return [[1, rec[0] as number, leftNow(state, scope, take), 0], 1];
    }
    if (rec !== undefined) state.delete(record.key);
  }
  let applied: number;
  if (op === 'f') {
    const moved = refundAnchor(state, scope, adjust, units, anchor, ttl as number);
    if (moved === undefined) return [[0, 0, leftNow(state, scope, take), 0], 0];
    applied = moved;
  } else applied = (adjust(units, undefined, units) as [number, number])[0];
  const left = leftNow(state, scope, take);
  if (record !== undefined) {
    state.set(record.key, 'string', recordText([applied, left, Number(ask)]), ttl);
  }
  return [[1, applied + 0, left, 0], 0];
}

/** A reserve-all (op `m`, as `reserve_all_request` in `settle/priced.lua`): pairs of scope and record. */
function reserveAll(
  state: TwinState,
  items: readonly ReadItem[],
): [slots: (readonly number[])[], replayed: number] {
  const scopes = items.filter((_, j) => j % 2 === 0);
  const records = items.filter((_, j) => j % 2 === 1);
  const twins = scopes.map(settleTwinOf);
  const ask = Number((records[records.length - 1] as ReadItem).args[1]);
  const recs: (number[] | 'tombstone' | undefined)[] = [];
  let any = false;
  let tomb = false;
  for (const record of records) {
    const rec = reservation(state, record.key);
    recs.push(rec);
    if (rec === 'tombstone') tomb = true;
    else if (rec !== undefined) {
      any = true;
      if (rec[7] !== ask) return [scopes.map(() => [0, 0, 0, 0]), 2];
    }
  }
  if (tomb) {
    return [
      scopes.map((scope, j) => cancelled(state, scope, (twins[j] as { take: Twin }).take)),
      1,
    ];
  }
  if (any) {
    return [recs.map((rec) => (Array.isArray(rec) ? rec.slice(0, 4) : [0, 0, 0, 0])), 1];
  }
  const units = scopes.map((scope) => Number(scope.args[scope.args.length - 1]));
  const dry = scopes.map((scope, j) =>
    decideItem(state, scope.key, scope.args, (twins[j] as { take: Twin }).take, DRY),
  );
  const all = dry.every((r) => r[0] === 1);
  const slots = scopes.map((scope, j) => {
    const { take, settle } = twins[j] as { take: Twin; settle: SettleTwin };
    let r = dry[j] as readonly number[];
    if (all) {
      r = decideItem(state, scope.key, scope.args, take, TAKE);
      const mark = settle(
        state,
        scope.key,
        scope.args,
        undefined,
        undefined,
        units[j] as number,
      ) as number;
      const record = records[j] as ReadItem;
      const ttl = Number(record.args[0]);
      const gen = generation(state, scope.key, ttl);
      state.set(
        record.key,
        'string',
        recordText([...r, units[j] as number, mark, gen, ask, 0]),
        ttl,
      );
    } else {
      let probed: readonly number[] = [0, 0, 0, 0];
      try {
        probed = decideItem(state, scope.key, scope.args, take, REPAIR);
      } catch {}
      if (r[0] === 1) r = [0, probed[1] as number, probed[2] as number, 0];
      else {
        const b = refusedBlock(state, scope.key, scope.args, r);
        r = [0, b[1] as number, b[2] as number, b[3] as number];
      }
    }
    return r;
  });
  return [slots, 0];
}

/** Runs one priced request (`items`: the scope, then its record if any) into `reply`. */
export function pricedTwin(
  state: TwinState,
  op: string,
  items: readonly ReadItem[],
  reply: ReplyWriter,
): void {
  if (op === 'm') {
    try {
      const [slots, replayed] = reserveAll(state, items);
      for (const r of slots) {
        reply.item(r);
        reply.item([replayed, 0, 0, 0]);
      }
    } catch (error) {
      reply.failed(items.length, replyErrorText(error));
    }
    return;
  }
  try {
    const [slots, replayed] = request(state, op, items[0] as ReadItem, items[1], items.slice(2));
    reply.item(slots);
    if (items.length >= 2) reply.item([replayed, 0, 0, 0]);
    for (let j = 2; j < items.length; j++) reply.item([0, 0, 0, 0]);
  } catch (error) {
    reply.failed(items.length, replyErrorText(error));
  }
}
