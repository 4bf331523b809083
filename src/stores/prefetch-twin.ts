/**
 * The in-memory twin of the prefetch operations of the batch script (`settle/prefetch.lua`):
 * a grant (`w`: the scope item, then its marker) and a give-back (`y`: the scope item).
 */
import type { ReadItem, ReplyWriter } from '../algorithms/batch-wire.js';
import { ALGORITHMS } from '../algorithms/registry.js';
import { settleOf } from '../algorithms/settle/registry.js';
import { TAKE, type TwinState } from '../algorithms/twin.js';
import { StoreError } from '../errors.js';
import { decideItem } from './block-twin.js';
import { replyErrorText } from './retry-safe-twin.js';

/** The operations this module runs. */
export const PREFETCH_OPS: ReadonlySet<string> = new Set(['w', 'y']);

function request(
  state: TwinState,
  op: string,
  scope: ReadItem,
): [slots: readonly number[], mark: number] {
  const take = ALGORITHMS[scope.batchId - 1];
  const settle = take && settleOf(take.script)?.twin;
  if (take === undefined || settle === undefined) {
    throw new StoreError('ERR prefetch does not support this algorithm');
  }
  const args = scope.args;
  const last = Number(args[args.length - 1]);
  if (op === 'w') {
    const r = decideItem(state, scope.key, args, take.twin, TAKE);
    if (r[0] !== 1) return [r, 0];
    const want = Math.min(last, Math.floor((r[1] as number) / 8));
    let granted = 0;
    let left = r[1] as number;
    if (want > 0) {
      [granted, left] = settle(state, scope.key, args, want, undefined, want) as [number, number];
    }
    const mark = settle(state, scope.key, args, undefined, undefined, 0) as number;
    return [[1, left, r[2] as number, granted], mark];
  }
  const units = Number(args[args.length - 2]);
  const [applied, left] = settle(state, scope.key, args, -units, last, units) as [number, number];
  return [[1, applied, left, 0], 0];
}

/** Runs one prefetch request (`items`: the scope, then a grant's marker) into `reply`. */
export function prefetchTwin(
  state: TwinState,
  op: string,
  items: readonly ReadItem[],
  reply: ReplyWriter,
): void {
  try {
    const [slots, mark] = request(state, op, items[0] as ReadItem);
    reply.item(slots);
    if (items.length === 2) reply.item([mark, 0, 0, 0]);
  } catch (error) {
    reply.failed(items.length, replyErrorText(error));
  }
}
