/**
 * The in-memory twin of the priced operations of the batch script (`settle/priced.lua`):
 * reserve (`k`), settle (`s`), refund (`f`) and charge (`g`), each a scope item and its record.
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

function recordNumbers(state: TwinState, key: string): number[] | undefined {
  const text = state.get<unknown>(key, 'string');
  if (text === undefined) return undefined;
  const out: number[] = [];
  for (const part of String(text).split(',')) {
    if (part === '') continue;
    const x = luaNumber(part);
    if (x === undefined || !Number.isInteger(x)) return undefined;
    out.push(x);
  }
  return out;
}

const recordText = (values: readonly number[]) => values.map((v) => String(v)).join(',');

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
  let g = luaNumber(String(state.get<unknown>(gkey, 'string') ?? '0')) ?? 0;
  if (ttl !== undefined) {
    if (g === 0) {
      g = state.nowUs;
      state.set(gkey, 'string', String(g), ttl);
    } else state.pexpire(gkey, ttl);
  }
  return g;
}

function request(
  state: TwinState,
  op: string,
  scope: ReadItem,
  record: ReadItem | undefined,
): [slots: readonly number[], replayed: number] {
  const { take, settle } = settleTwinOf(scope);
  const args = scope.args;
  const units = Number(args[args.length - 1]);
  const adjust = (delta: number | undefined, mark: number | undefined, cost: number) =>
    settle(state, scope.key, args, delta, mark, cost);
  const ttl = record === undefined ? undefined : Number(record.args[0]);
  if (op === 'k') {
    const key = (record as ReadItem).key;
    const rec = recordNumbers(state, key);
    if (rec !== undefined && rec.length >= 8) return [rec.slice(0, 4), 1];
    const r = decideItem(state, scope.key, args, take, TAKE);
    let mark = 0;
    let gen = 0;
    if (r[0] === 1) {
      mark = adjust(undefined, undefined, units) as number;
      gen = generation(state, scope.key, ttl);
    }
    state.set(key, 'string', recordText([...r, units, mark, gen, 0]), ttl);
    return [r, 0];
  }
  if (op === 's') {
    const key = (record as ReadItem).key;
    const rec = recordNumbers(state, key);
    if (rec === undefined || rec.length < 8) return [[0, 0, 0, 0], 0];
    if (rec[7] === 1 && rec.length === 10) return [[1, rec[8] as number, rec[9] as number, 0], 1];
    let applied = 0;
    let left = rec[1] as number;
    if (rec[0] === 1 && generation(state, scope.key, undefined) === rec[6]) {
      const cost = rec[4] as number;
      [applied, left] = adjust(units - cost, rec[5], cost) as [number, number];
    }
    state.update(key, recordText([...rec.slice(0, 7), 1, applied, left]));
    return [[1, applied, left, 0], 0];
  }
  if (record !== undefined) {
    const rec = recordNumbers(state, record.key);
    if (rec !== undefined && rec.length === 2)
      return [[1, rec[0] as number, rec[1] as number, 0], 1];
  }
  const r = adjust(op === 'f' ? -units : units, undefined, units) as [number, number];
  if (record !== undefined) state.set(record.key, 'string', recordText(r), ttl);
  return [[1, r[0], r[1], 0], 0];
}

/** A reserve-all (op `m`, as `reserve_all_request` in `settle/priced.lua`): pairs of scope and record. */
function reserveAll(
  state: TwinState,
  items: readonly ReadItem[],
): [slots: (readonly number[])[], replayed: number] {
  const scopes = items.filter((_, j) => j % 2 === 0);
  const records = items.filter((_, j) => j % 2 === 1);
  const twins = scopes.map(settleTwinOf);
  const recs = records.map((record) => recordNumbers(state, record.key));
  if (recs.some((rec) => rec !== undefined && rec.length >= 8)) {
    return [
      recs.map((rec) => (rec !== undefined && rec.length >= 8 ? rec.slice(0, 4) : [0, 0, 0, 0])),
      1,
    ];
  }
  const units = scopes.map((scope) => Number(scope.args[scope.args.length - 1]));
  const dry = scopes.map((scope, j) =>
    decideItem(state, scope.key, scope.args, (twins[j] as { take: Twin }).take, DRY),
  );
  const all = dry.every((r) => r[0] === 1);
  const slots = scopes.map((scope, j) => {
    const { take, settle } = twins[j] as { take: Twin; settle: SettleTwin };
    let r = dry[j] as readonly number[];
    let mark = 0;
    let gen = 0;
    if (all) {
      r = decideItem(state, scope.key, scope.args, take, TAKE);
      mark = settle(
        state,
        scope.key,
        scope.args,
        undefined,
        undefined,
        units[j] as number,
      ) as number;
      gen = generation(state, scope.key, Number((records[j] as ReadItem).args[0]));
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
    const record = records[j] as ReadItem;
    state.set(
      record.key,
      'string',
      recordText([...r, units[j] as number, mark, gen, 0]),
      Number(record.args[0]),
    );
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
    const [slots, replayed] = request(state, op, items[0] as ReadItem, items[1]);
    reply.item(slots);
    if (items.length === 2) reply.item([replayed, 0, 0, 0]);
  } catch (error) {
    reply.failed(items.length, replyErrorText(error));
  }
}
