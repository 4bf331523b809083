/**
 * The bounded-script-time rule: no script call holds Redis for 5 ms or more, at any
 * parameter the policy builders accept and for the largest batch the coalescer builds
 * (the measurement and its cases: bench/script-time.ts). What is asserted is CPU time: the
 * heaviest script call's share of what Redis's main thread spent in each of five rounds,
 * which another process taking the core cannot inflate (wall time can: it is printed, and
 * the benchmark reports it). The old sliding log (one member per unit: 12.9 ms for one take
 * of cost 10,000), batches bounded by count alone and a loop planted in a script fail every
 * round.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  measureScriptTimes,
  SCRIPT_TIME_LIMIT_US,
  scriptTimeCases,
} from '../../bench/script-time.js';
import { useRedis } from '../helpers/redis.js';

const redis = useRedis();

describe('bounded script time: no script call holds Redis for 5 ms', () => {
  for (const c of scriptTimeCases) {
    it(c.name, async (t) => {
      const [result] = await measureScriptTimes(redis.server.url, 5, [c]);
      assert.ok(result);
      t.diagnostic(
        `per round, heaviest call's CPU µs: ${result.cpuRounds.join(', ')}; wall µs, longest / second-longest: ${result.rounds.map((r, i) => `${r}/${result.secondRounds[i]}`).join(', ')}`,
      );
      assert.ok(
        result.cpuUs < SCRIPT_TIME_LIMIT_US,
        `a script call used ${result.cpuUs} µs of Redis's CPU (per round: ${result.cpuRounds.join(', ')})`,
      );
    });
  }
});
