/**
 * The in-memory twin of the priced operations of the batch script (`settle/priced.lua`):
 * reserve (`k`), settle (`s`), refund (`f`) and charge (`g`), each a scope item and its record.
 */
import type { ReadItem, ReplyWriter } from '../algorithms/batch-wire.js';
import { ALGORITHMS } from '../algorithms/registry.js';
import { settleOf } from '../algorithms/settle/registry.js';
import type { SettleTwin } from '../algorithms/settle/twins.js';
import { luaNumber, TAKE, type TwinState } from '../algorithms/twin.js';
import { StoreError } from '../errors.js';
import { decideItem } from './block-twin.js';
import { replyErrorText } from './retry-safe-twin.js';

/** The operations this module runs. */
export const PRICED_OPS: ReadonlySet<string> = new Set(['k', 's', 'f', 'g']);

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
  const take = ALGORITHMS[scope.batchId - 1];
  const settle: SettleTwin | undefined = take && settleOf(take.script)?.twin;
  if (take === undefined || settle === undefined) {
    throw new StoreError('ERR reserve, settle, refund and charge do not support this algorithm');
  }
  const args = scope.args;
  const units = Number(args[args.length - 1]);
  const adjust = (delta: number | undefined, mark: number | undefined, cost: number) =>
    settle(state, scope.key, args, delta, mark, cost);
  const ttl = record === undefined ? undefined : Number(record.args[0]);
  if (op === 'k') {
    const key = (record as ReadItem).key;
    const rec = recordNumbers(state, key);
    if (rec !== undefined && rec.length >= 8) return [rec.slice(0, 4), 1];
    const r = decideItem(state, scope.key, args, take.twin, TAKE);
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

/** Runs one priced request (`items`: the scope, then its record if any) into `reply`. */
export function pricedTwin(
  state: TwinState,
  op: string,
  items: readonly ReadItem[],
  reply: ReplyWriter,
): void {
  try {
    const [slots, replayed] = request(state, op, items[0] as ReadItem, items[1]);
    reply.item(slots);
    if (items.length === 2) reply.item([replayed, 0, 0, 0]);
  } catch (error) {
    reply.failed(items.length, replyErrorText(error));
  }
}
