/**
 * The in-memory twin of op `i` of `batch.lua` (a take with an id): the record's replay, or the
 * take decided and recorded (see `limiter/retry-safe.ts`). Kept apart from `memory.ts`, which
 * runs it.
 */
import { REPLY_SLOTS, type ReadItem, ReplyWriter } from '../algorithms/batch-wire.js';
import { luaNumber, type TwinState } from '../algorithms/twin.js';
import { StoreError } from '../errors.js';

/** The text of an item's error reply, as Redis gives it (no sluice prefix). */
export function replyErrorText(error: unknown): string {
  return error instanceof StoreError
    ? error.message.replace(/^Redis replied with an error: /, '')
    : String(error instanceof Error ? error.message : error);
}

/** A record's slots, as `recorded()` in `batch.lua` reads them; undefined when not a record of n items. */
function recorded(stored: unknown, n: number): number[] | undefined {
  if (stored === undefined) return undefined;
  const slots: number[] = [];
  for (const part of String(stored).split(',')) {
    if (part === '') continue; // gmatch('[^,]+') skips empty runs
    const value = luaNumber(part);
    if (value === undefined) return undefined;
    slots.push(value);
  }
  return slots.length === REPLY_SLOTS * n ? slots : undefined;
}

/**
 * Runs one op-`i` request: `items` are the takes, then the record; `take` decides the takes
 * as op `t` into the writer it is given.
 */
export function retrySafeTwin(
  state: TwinState,
  items: readonly ReadItem[],
  reply: ReplyWriter,
  take: (taken: readonly ReadItem[], writer: ReplyWriter) => void,
): void {
  const record = items[items.length - 1] as ReadItem;
  const taken = items.slice(0, -1);
  const n = taken.length;
  let stored: unknown;
  try {
    stored = state.get<unknown>(record.key, 'string');
  } catch (error) {
    reply.failed(n + 1, replyErrorText(error));
    return;
  }
  const replay = recorded(stored, n);
  if (replay !== undefined) {
    for (let j = 0; j < n; j++) reply.item(replay.slice(REPLY_SLOTS * j, REPLY_SLOTS * (j + 1)));
    reply.item([1, 0, 0, 0]);
    return;
  }
  const inner = new ReplyWriter();
  take(taken, inner);
  const out = inner.finish();
  if (out[0] === -1) {
    reply.failed(n, String(out[REPLY_SLOTS * n]));
  } else {
    for (let j = 0; j < n; j++) reply.item(out.slice(REPLY_SLOTS * j, REPLY_SLOTS * (j + 1)));
    const text = (out as number[]).map((v) => Math.trunc(v).toString()).join(',');
    state.set(record.key, 'string', text, Number(record.args[0]));
  }
  reply.item([0, 0, 0, 0]);
}
