/**
 * Chooses `MAX_PRICED_LOG_LIMIT`: the heaviest script call of a sliding window log's settle
 * and refund at their worst (bench/script-time.ts, `pricedLogCases`) at several limits, on a
 * private Redis. `npx tsx bench/priced-log.ts [rounds] [limit…]`.
 */
import { startRedisServer } from '../src/demo/redis-server.js';
import { measureScriptTimes, pricedLogCases } from './script-time.js';

const [roundsArg, ...limitArgs] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 5);
const limits = limitArgs.length > 0 ? limitArgs.map(Number) : [250, 500];
const redis = await startRedisServer();
try {
  for (const limit of limits) {
    for (const r of await measureScriptTimes(redis.url, rounds, pricedLogCases(limit))) {
      const sorted = [...r.cpuRounds].sort((a, b) => a - b);
      console.log(
        `${r.name}\n  heaviest call CPU µs per round: ${r.cpuRounds.join(', ')} (median ${sorted[Math.floor(sorted.length / 2)]}, max ${r.cpuUs}); wall µs longest/second: ${r.rounds.map((x, i) => `${x}/${r.secondRounds[i]}`).join(', ')}`,
      );
    }
  }
} finally {
  await redis.stop();
}
