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

/**
 * As `recorded()` in `batch.lua`: the slots of the record of an admission of this request
 * (`ask`), 'mismatch' for another request's, undefined for none (a record of another shape is
 * removed and counts as none).
 */
function recorded(
  state: TwinState,
  key: string,
  n: number,
  ask: number,
): number[] | 'mismatch' | undefined {
  let stored: unknown;
  let ok = true;
  try {
    stored = state.get<unknown>(key, 'string');
  } catch {
    ok = false;
  }
  if (ok && stored === undefined) return undefined;
  let slots: number[] | undefined = ok && state.pttl(key) >= 0 ? [] : undefined;
  if (slots !== undefined) {
    for (const part of String(stored).split(',')) {
      if (part === '') continue; // gmatch('[^,]+') skips empty runs
      const value = luaNumber(part);
      if (value === undefined || !Number.isInteger(value) || value < 0) {
        slots = undefined;
        break;
      }
      slots.push(value);
    }
  }
  let m: number | undefined = slots === undefined ? undefined : (slots.length - 1) / RECORD_SLOTS;
  if (slots !== undefined && m !== undefined && m >= 1 && Number.isInteger(m)) {
    for (let j = 0; j < RECORD_SLOTS * m; j += RECORD_SLOTS) {
      if (slots[j] !== 1 || slots[j + 3] !== 0) {
        m = undefined;
        break;
      }
    }
    if (m === n && slots[slots.length - 1] === ask) return slots;
    if (m !== undefined) return 'mismatch';
  }
  state.delete(key);
  return undefined;
}

/** Numbers per item of a take's record: its slots, mark, generation, key digest, units left. */
const RECORD_SLOTS = 8;

/**
 * Runs one op-`i` request: `items` are the takes, then the record; `take` decides the takes
 * as op `t` into the writer it is given; `marks` gives each taken item's mark and generation
 * (see `takeMarks` in `priced-twin.ts`).
 */
export function retrySafeTwin(
  state: TwinState,
  items: readonly ReadItem[],
  reply: ReplyWriter,
  take: (taken: readonly ReadItem[], writer: ReplyWriter) => void,
  marks: (taken: readonly ReadItem[], ttl: number) => readonly number[],
): void {
  const record = items[items.length - 1] as ReadItem;
  const taken = items.slice(0, -1);
  const n = taken.length;
  const ask = record.args[1] as string;
  const replay = recorded(state, record.key, n, Number(ask));
  if (replay === 'mismatch') {
    for (let j = 0; j < n; j++) reply.item([0, 0, 0, 0]);
    reply.item([2, 0, 0, 0]);
    return;
  }
  if (replay !== undefined) {
    for (let j = 0; j < n; j++) {
      reply.item(replay.slice(RECORD_SLOTS * j, RECORD_SLOTS * j + REPLY_SLOTS));
    }
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
    // Only an admission is recorded (a refusal consumed nothing: decided afresh).
    let admitted = true;
    for (let j = 0; j < REPLY_SLOTS * n; j += REPLY_SLOTS) if (out[j] !== 1) admitted = false;
    if (admitted) {
      const ttl = Number(record.args[0]);
      const marked = marks(taken, ttl);
      const text: string[] = [];
      for (let j = 0; j < n; j++) {
        for (let l = 0; l < REPLY_SLOTS; l++) {
          text.push(Math.trunc(out[REPLY_SLOTS * j + l] as number).toString());
        }
        text.push(String(marked[2 * j]), String(marked[2 * j + 1]));
        text.push(record.args[2 + 2 * j] as string, record.args[3 + 2 * j] as string);
      }
      text.push(ask);
      state.set(record.key, 'string', text.join(','), ttl);
    }
  }
  reply.item([0, 0, 0, 0]);
}
