/**
 * The settle body of each algorithm that supports reserve, settle, cancel, refund and charge
 * (see `priced.lua` and `limiter/priced.ts`), with its in-memory twin. The sliding window log
 * has none: its members carry running totals, so giving units back from one member would
 * rewrite every later one (not bounded in time; see docs/priced.md). The bodies use `floor_div`, `ceil_div` and
 * `ms_up` from `priced.lua`, into which they are inserted.
 */
import { readFileSync } from 'node:fs';
import { fixedWindowScript } from '../fixed-window.js';
import { gcraScript } from '../gcra.js';
import { type LuaScript, scriptFromSource } from '../script.js';
import { slidingWindowCounterScript } from '../sliding-window-counter.js';
import { tokenBucketScript } from '../token-bucket.js';
import {
  fixedWindowSettle,
  gcraSettle,
  type SettleTwin,
  slidingWindowCounterSettle,
  tokenBucketSettle,
} from './twins.js';

/** An algorithm's settle body and its twin. */
export interface Settle {
  readonly script: LuaScript;
  readonly twin: SettleTwin;
}

function load(name: string, twin: SettleTwin): Settle {
  const source = readFileSync(new URL(`./${name}.lua`, import.meta.url), 'utf8');
  return { script: scriptFromSource(`settle-${name}`, source, 1), twin };
}

const SETTLES = new Map<LuaScript, Settle>([
  [fixedWindowScript, load('fixed-window', fixedWindowSettle)],
  [tokenBucketScript, load('token-bucket', tokenBucketSettle)],
  [gcraScript, load('gcra', gcraSettle)],
  [slidingWindowCounterScript, load('sliding-window-counter', slidingWindowCounterSettle)],
]);

/** The settle body of the algorithm whose take script is `script`, if it has one. */
export function settleOf(script: LuaScript): Settle | undefined {
  return SETTLES.get(script);
}
