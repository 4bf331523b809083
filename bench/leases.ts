/**
 * Leases and waits, measured on a private Redis (`node --import tsx bench/leases.ts`):
 *
 * 1. acquire + release of a concurrency lease against two takes of a fixed window — the same
 *    two script calls' worth of work — as pairs per second, 64 pairs in flight;
 * 2. `wait` on a saturated scope: 50 waiters in one process, each waiting again as soon as it
 *    is admitted, under a GCRA of 200 per second (bursts of 10) for 5 s: the admitted rate against
 *    the policy's, and the script calls Redis ran per admission (no polling: about 2).
 */
import { concurrency } from '../src/algorithms/concurrency.js';
import { fixedWindow } from '../src/algorithms/fixed-window.js';
import { gcra } from '../src/algorithms/gcra.js';
import { startRedisServer } from '../src/demo/redis-server.js';
import { RateLimiter } from '../src/limiter/rate-limiter.js';
import { connectRedis } from '../src/redis/node-redis/connect.js';

const server = await startRedisServer();
const redis = await connectRedis({ url: server.url });
const admin = await connectRedis({ url: server.url, fastPath: false });
const limiter = new RateLimiter({ client: redis, timeoutMs: 2000 });

/** Script calls Redis ran so far (EVALSHA + EVAL). */
async function scriptCalls(): Promise<number> {
  const info = String(await admin.client.info('commandstats'));
  const count = (name: string) =>
    Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return count('evalsha') + count('eval');
}

/** Runs `pair` `total` times, `inFlight` at once; pairs per second. */
async function pairsPerSecond(
  total: number,
  inFlight: number,
  pair: (i: number) => Promise<unknown>,
) {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < total) await pair(next++);
    }),
  );
  return (total * 1000) / (performance.now() - started);
}

const TOTAL = 20_000;
const running = concurrency({ limit: 10, leaseMs: 60_000 });
const window = fixedWindow({ limit: 1_000_000_000, windowMs: 3_600_000 });
const tenants = Array.from({ length: 64 }, (_, i) => ({ tenant: `bench-${i}` }));
// Warm-up: scripts loaded, connections up.
await pairsPerSecond(2000, 64, (i) => limiter.take(tenants[i % 64] as never, window));
const takes = await pairsPerSecond(TOTAL, 64, async (i) => {
  const scope = tenants[i % 64] as { tenant: string };
  await limiter.take(scope, window);
  await limiter.take(scope, window);
});
const leases = await pairsPerSecond(TOTAL, 64, async (i) => {
  const scope = tenants[i % 64] as { tenant: string };
  const lease = await limiter.acquire(scope, running);
  await lease.release();
});

const RATE = 200;
const RUN_MS = 5000;
const api = gcra({ limit: RATE, periodMs: 1000, burst: 10 });
const before = await scriptCalls();
const end = performance.now() + RUN_MS;
let admitted = 0;
let first = 0;
let last = 0;
await Promise.all(
  Array.from({ length: 50 }, async () => {
    while (performance.now() < end) {
      const maxWaitMs = Math.max(0, Math.floor(end - performance.now()));
      const d = await limiter.wait({ tenant: 'saturated' }, api, { maxWaitMs });
      if (!d.allowed) break;
      admitted++;
      last = performance.now();
      if (first === 0) first = last;
    }
  }),
);
const calls = (await scriptCalls()) - before - 1; // the reading's own INFO is not a script
// The burst is spent at once: the rate is the steady one after it.
const rate = ((admitted - 10) * 1000) / (last - first);

console.log('| measure | value |');
console.log('| --- | --- |');
console.log(`| two takes (fixed window), pairs/s | ${Math.round(takes)} |`);
console.log(`| acquire + release (concurrency), pairs/s | ${Math.round(leases)} |`);
console.log(`| ratio | ${(leases / takes).toFixed(2)} |`);
console.log(
  `| wait, saturated GCRA ${RATE}/s, 50 waiters: admitted/s | ${rate.toFixed(1)} (${((rate / RATE) * 100).toFixed(1)} %) |`,
);
console.log(`| script calls per admission | ${(calls / admitted).toFixed(2)} |`);

redis.destroy();
admin.destroy();
await server.stop();
