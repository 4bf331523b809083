/**
 * Every algorithm sluice implements: its Lua script and its in-memory twin. The order is
 * the id a batch item sends (see `batch.lua`), so add new algorithms at the end.
 */
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
}

export const ALGORITHMS: readonly Algorithm[] = [
  { script: fixedWindowScript, twin: fixedWindowTwin },
  { script: tokenBucketScript, twin: tokenBucketTwin },
  { script: slidingWindowLogScript, twin: slidingWindowLogTwin },
  { script: slidingWindowCounterScript, twin: slidingWindowCounterTwin },
  { script: gcraScript, twin: gcraTwin },
];
