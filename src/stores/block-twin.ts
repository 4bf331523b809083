/**
 * The in-memory twin of `block.lua`: a policy's block beside the scope's key, decided around
 * its algorithm's twin.
 */
import type { Twin, TwinMode, TwinState } from '../algorithms/twin.js';
import { luaNumber } from '../algorithms/twin.js';
import type { BlockSpec } from '../types.js';

const DRY: TwinMode = { dry: true, probe: false };

type Reply = [number, number, number, number];

/** The block parameters after the marker 'b' in an item's ARGV, as `block_of` finds them. */
export function blockOf(args: readonly string[]): BlockSpec | undefined {
  for (let j = 3; j + 4 < args.length; j++) {
    if (args[j] === 'b') {
      const [blockMs, factor, maxMs, withinMs] = args.slice(j + 1, j + 5).map(Number) as Reply;
      return { blockMs, factor, maxMs, withinMs };
    }
  }
  return undefined;
}

function startBlock(state: TwinState, key: string, r: readonly number[], b: BlockSpec): Reply {
  const k = `${key}:b`;
  let level = 0;
  if (state.pttl(k) > 0) {
    level = luaNumber(state.get<unknown>(k, 'string')) ?? 0;
    if (!Number.isInteger(level) || level < 0) level = 0;
  }
  let length = b.blockMs;
  for (let n = 0; n < level && length < b.maxMs; n++) length *= b.factor;
  if (length > b.maxMs) length = b.maxMs;
  state.set(k, 'string', String(level + 1), length + b.withinMs);
  let wait = r[3] as number;
  if (wait >= 0 && wait < length) wait = length;
  return [0, -1, length, wait];
}

/** One item decided as `decide()` in `batch.lua`: its block first, when its policy has one. */
export function decideItem(
  state: TwinState,
  key: string,
  args: readonly string[],
  twin: Twin,
  mode: TwinMode,
): Reply {
  const b = blockOf(args);
  if (b === undefined) return twin(state, key, args, mode);
  const left = state.pttl(`${key}:b`) - b.withinMs;
  if (left > 0) {
    // As block.lua: the later of the block's end and the algorithm's own (dry) wait.
    const r = twin(state, key, args, DRY);
    const wait = r[3] as number;
    return [0, -1, left, r[0] === 0 && (wait < 0 || wait > left) ? wait : left];
  }
  const r = twin(state, key, args, mode);
  if (r[0] === 0 && (r[3] as number) >= 0 && !mode.dry && !mode.probe) {
    return startBlock(state, key, r, b);
  }
  return r;
}

/** `refused_block` of `batch.lua`: a blocking item of a refused takeAll starts its block. */
export function refusedBlock(
  state: TwinState,
  key: string,
  args: readonly string[],
  r: readonly number[],
): readonly number[] {
  const b = blockOf(args);
  if (b === undefined || r[1] === -1 || (r[3] as number) < 0) return r;
  try {
    return startBlock(state, key, r, b);
  } catch {
    return r;
  }
}
