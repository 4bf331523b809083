/**
 * The settle body of each algorithm (reserve, settle, cancel, refund and charge; see
 * `priced.lua` and `limiter/priced.ts`), with its in-memory twin. The sliding window log's
 * rewrites the members after a reservation's (its running totals), in time that grows with
 * the policy's limit: its policies are priced only up to `MAX_PRICED_LOG_LIMIT` (see
 * docs/priced.md). The bodies use `floor_div`, `ceil_div` and `ms_up` from `priced.lua`, into
 * which they are inserted.
 */
import { readFileSync } from 'node:fs';
import { fixedWindowScript } from '../fixed-window.js';
import { gcraScript } from '../gcra.js';
import { type LuaScript, scriptFromSource } from '../script.js';
import { slidingWindowCounterScript } from '../sliding-window-counter.js';
import { slidingWindowLogScript } from '../sliding-window-log.js';
import { tokenBucketScript } from '../token-bucket.js';
import {
  fixedWindowSettle,
  gcraSettle,
  type SettleTwin,
  slidingWindowCounterSettle,
  slidingWindowLogSettle,
  tokenBucketSettle,
} from './twins.js';

/** An algorithm's settle body and its twin. */
export interface Settle {
  readonly script: LuaScript;
  readonly twin: SettleTwin;
  /**
   * Redis time a settle or refund adds to its item at its worst under a policy of this
   * `limit`, µs (see `Algorithm.work`): 0 for the bodies that run in O(1).
   */
  readonly work: (limit: number) => number;
}

function load(name: string, twin: SettleTwin, work: (limit: number) => number = () => 0): Settle {
  const source = readFileSync(new URL(`./${name}.lua`, import.meta.url), 'utf8');
  return { script: scriptFromSource(`settle-${name}`, source, 1), twin, work };
}

/** µs per member of a sliding window log's rewrite (bench/script-time.ts, reference machine). */
const LOG_REWRITE_US = 5;

const SETTLES = new Map<LuaScript, Settle>([
  [fixedWindowScript, load('fixed-window', fixedWindowSettle)],
  [tokenBucketScript, load('token-bucket', tokenBucketSettle)],
  [gcraScript, load('gcra', gcraSettle)],
  [slidingWindowCounterScript, load('sliding-window-counter', slidingWindowCounterSettle)],
  // A rewrite of up to `limit` members (ZREM and ZADD of each, and its name parsed and
  // formatted), measured by bench/script-time.ts.
  [
    slidingWindowLogScript,
    load('sliding-window-log', slidingWindowLogSettle, (limit) =>
      Math.ceil(limit * LOG_REWRITE_US),
    ),
  ],
]);

/** The settle body of the algorithm whose take script is `script`, if it has one. */
export function settleOf(script: LuaScript): Settle | undefined {
  return SETTLES.get(script);
}
