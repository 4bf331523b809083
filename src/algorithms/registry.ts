/**
 * Every algorithm sluice implements: its Lua script and its in-memory twin. The order is
 * the id a batch item sends (see `batch.lua`), so add new algorithms at the end.
 */
import { concurrencyScript, concurrencyTwin } from './concurrency.js';
import { fixedWindowScript, fixedWindowTwin } from './fixed-window.js';
import { gcraScript, gcraTwin } from './gcra.js';
import type { LuaScript } from './script.js';
import { slidingWindowCounterScript, slidingWindowCounterTwin } from './sliding-window-counter.js';
import { slidingWindowLogScript, slidingWindowLogTwin } from './sliding-window-log.js';
import { tokenBucketScript, tokenBucketTwin } from './token-bucket.js';
import type { Twin } from './twin.js';

export interface Algorithm {
  readonly script: LuaScript;
  readonly twin: Twin;
  /**
   * Redis time of one batch item of a policy with this `limit` at its worst (any stored
   * state), in µs, estimated from bench/script-time.ts on the reference machine (2 cores,
   * Redis 7.0): what bounds a batch (`MAX_BATCH_WORK` in `coalescer.ts`).
   */
  readonly work: (limit: number) => number;
}

export const ALGORITHMS: readonly Algorithm[] = [
  { script: fixedWindowScript, twin: fixedWindowTwin, work: () => 4 },
  { script: tokenBucketScript, twin: tokenBucketTwin, work: () => 5 },
  {
    script: slidingWindowLogScript,
    twin: slidingWindowLogTwin,
    // A search and a bounded trim, and a log that expired when the script touches it is
    // freed on the spot (Redis's default lazyfree-lazy-expire no): a cost per member, up to
    // `limit` members.
    work: (limit) => 160 + Math.ceil(limit * 0.3),
  },
  { script: slidingWindowCounterScript, twin: slidingWindowCounterTwin, work: () => 8 },
  { script: gcraScript, twin: gcraTwin, work: () => 5 },
  {
    script: concurrencyScript,
    twin: concurrencyTwin,
    // Bounded trims and reads, and a set that expired when the script touches it is freed
    // on the spot: a cost per member, up to `limit` members (as the log's).
    work: (limit) => 20 + Math.ceil(limit * 0.3),
  },
];
