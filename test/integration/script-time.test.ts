/**
 * The bounded-script-time rule: no script call holds Redis for 5 ms or more, at any
 * parameter the policy builders accept and for the largest batch the coalescer builds
 * (the measurement and its cases: bench/script-time.ts). A case passes when the shortest of
 * five rounds' second-longest script call is under 5 ms (one call in a round may meet a
 * pause of Redis's own: see bench/script-time.ts): the old sliding log (one member per
 * unit: 12.9 ms for one take of cost 10,000) and batches bounded by count alone fail every
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
        `per round, longest / second-longest script call (µs): ${result.rounds.map((r, i) => `${r}/${result.secondRounds[i]}`).join(', ')}`,
      );
      assert.ok(
        result.longestUs < SCRIPT_TIME_LIMIT_US,
        `script calls ran ${result.longestUs} µs (each round's second-longest: ${result.secondRounds.join(', ')})`,
      );
    });
  }
});
