/**
 * Prefetched quota (docs/prefetch.md), on a private redis-server:
 *
 * 1. Throughput of one hot admitting scope: a fixed window that never fills (limit 10^12 per
 *    60 s), `CONCURRENCY` (256) takes in flight from one process, closed loop, `ROUNDS` rounds
 *    of `DURATION_MS` each, every round measuring without prefetch, then with
 *    `prefetch: { maxUnits }` for maxUnits 64, 256 and `MAX_UNITS` (1,024); decisions/s,
 *    Redis CPU and script calls per decision; the ratio of medians and the per-round ratios.
 * 2. Under-admission at window ends under steady load: two replicas (a limiter and a client
 *    each) offering `RATE` takes/s each, open loop, to one scope of `LIMIT` per `WINDOW_MS`
 *    (demand above the limit), for `WINDOWS` windows: the units admitted in each complete
 *    window, as a share of the limit, without and with prefetch.
 *
 * Writes bench/prefetch/results.json (read by bench/targets.ts) and prints a Markdown summary.
 * Run: `npm run bench:prefetch` (env CONCURRENCY, ROUNDS, DURATION_MS, MAX_UNITS,
 * STEADY_MAX_UNITS, RATE, LIMIT, WINDOW_MS, WINDOWS).
 */
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Decision, fixedWindow, RateLimiter } from 'sluice';
import { connectRedis } from 'sluice/node-redis';
import { startRedisServer } from '../../src/demo/redis-server.js';
import { diffSnapshots, parseInfo, type RedisSnapshot } from '../redis-stats.js';
import { median } from '../report.js';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const CONCURRENCY = env('CONCURRENCY', 256);
const ROUNDS = env('ROUNDS', 3);
const DURATION_MS = env('DURATION_MS', 3000);
/** The hot scope's maxUnits (4× the concurrency: see docs/prefetch.md, "Choosing maxUnits"). */
const MAX_UNITS = env('MAX_UNITS', 1024);
/** Smaller maxUnits measured beside it, for how the gain depends on it. */
const SWEEP = [64, 256].filter((m) => m < MAX_UNITS);
/** The steady load's maxUnits (its grants are bounded by an eighth of what is left anyway). */
const STEADY_MAX_UNITS = env('STEADY_MAX_UNITS', 256);
const RATE = env('RATE', 3000);
const LIMIT = env('LIMIT', 4000);
const WINDOW_MS = env('WINDOW_MS', 1000);
const WINDOWS = env('WINDOWS', 6);

const server = await startRedisServer();
const admin = await connectRedis({ url: server.url, fastPath: false });
const snapshot = async (): Promise<RedisSnapshot> =>
  parseInfo(String(await admin.client.sendCommand(['INFO', 'cpu', 'commandstats'])));

interface Throughput {
  readonly prefetch: boolean;
  /** The policy's maxUnits; 0 without prefetch. */
  readonly maxUnits: number;
  readonly round: number;
  readonly decisionsPerSec: number;
  readonly redisCpuUsPerDecision: number;
  readonly scriptCallsPerDecision: number;
}

async function throughput(maxUnits: number, round: number): Promise<Throughput> {
  const prefetch = maxUnits > 0;
  const client = await connectRedis({ url: server.url });
  const limiter = new RateLimiter({ client, timeoutMs: 10_000 });
  const policy = fixedWindow({
    limit: 1e12,
    windowMs: 60_000,
    ...(prefetch ? { prefetch: { maxUnits } } : {}),
  });
  const scope = { tenant: `hot-${round}-${maxUnits}`, route: 'GET/hot' };
  let stop = performance.now() + 500; // warm-up
  let count = 0;
  const worker = async () => {
    while (performance.now() < stop) {
      await limiter.take(scope, policy);
      count++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const before = await snapshot();
  count = 0;
  const started = performance.now();
  stop = started + DURATION_MS;
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const elapsed = performance.now() - started;
  const redis = diffSnapshots(before, await snapshot());
  await limiter.close();
  await client.close();
  return {
    prefetch,
    maxUnits,
    round,
    decisionsPerSec: (count / elapsed) * 1000,
    redisCpuUsPerDecision: redis.cpuUs / count,
    scriptCallsPerDecision: redis.scriptCalls / count,
  };
}

interface WindowShare {
  readonly prefetch: boolean;
  /** Takes/s each replica offers. */
  readonly rates: readonly number[];
  /** Admitted units of each complete window ÷ the limit. */
  readonly shares: readonly number[];
}

async function steady(prefetch: boolean, rates: readonly number[]): Promise<WindowShare> {
  const policy = fixedWindow({
    limit: LIMIT,
    windowMs: WINDOW_MS,
    ...(prefetch ? { prefetch: { maxUnits: STEADY_MAX_UNITS } } : {}),
  });
  const scope = { tenant: `steady-${prefetch}-${rates.join('-')}`, route: 'GET/hot' };
  const replicas = await Promise.all(
    rates.map(async (rate) => {
      const client = await connectRedis({ url: server.url });
      return { client, rate, limiter: new RateLimiter({ client, timeoutMs: 10_000 }) };
    }),
  );
  // Admissions by the window they were admitted in (its end, to 50 ms).
  const byWindow = new Map<number, number>();
  const note = (d: Decision) => {
    if (!d.allowed) return;
    const end = Math.round((performance.now() + d.resetMs) / 50);
    const known = [...byWindow.keys()].find((k) => Math.abs(k - end) <= 2) ?? end;
    byWindow.set(known, (byWindow.get(known) ?? 0) + 1);
  };
  const pending: Promise<unknown>[] = [];
  const tickMs = 5;
  const started = performance.now();
  const until = started + WINDOWS * WINDOW_MS;
  const sent = replicas.map(() => 0);
  while (performance.now() < until) {
    const elapsed = performance.now() - started;
    replicas.forEach(({ limiter, rate }, r) => {
      // Open loop: each replica's takes so far follow its rate, whatever the answers.
      for (; (sent[r] as number) < (rate * elapsed) / 1000; sent[r] = (sent[r] as number) + 1) {
        pending.push(limiter.take(scope, policy).then(note));
      }
    });
    await sleep(tickMs);
  }
  await Promise.allSettled(pending);
  for (const { limiter, client } of replicas) {
    await limiter.close();
    await client.close();
  }
  const counts = [...byWindow.entries()].sort((a, b) => a[0] - b[0]).map(([, n]) => n);
  // The first and the last window are partial (the load starts and stops inside them).
  return { prefetch, rates, shares: counts.slice(1, -1).map((n) => n / LIMIT) };
}

const runs: Throughput[] = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const maxUnits of [0, ...SWEEP, MAX_UNITS]) runs.push(await throughput(maxUnits, round));
}
const windows: WindowShare[] = [];
for (const rates of [
  [RATE, RATE],
  [RATE * 2, RATE / 20],
]) {
  windows.push(await steady(false, rates), await steady(true, rates));
}
await admin.close();
await server.stop();

const of = (maxUnits: number) => runs.filter((r) => r.maxUnits === maxUnits);
const gain = (maxUnits: number) => {
  const perRound = of(maxUnits).map(
    (r) => r.decisionsPerSec / (of(0).find((o) => o.round === r.round)?.decisionsPerSec ?? 1),
  );
  const ratio =
    median(of(maxUnits).map((r) => r.decisionsPerSec)) /
    median(of(0).map((r) => r.decisionsPerSec));
  return { maxUnits, ratio, perRound, spread: [Math.min(...perRound), Math.max(...perRound)] };
};
const { ratio, perRound, spread } = gain(MAX_UNITS);
const sweep = SWEEP.map(gain);
const underAdmission = windows.map((w) => ({
  prefetch: w.prefetch,
  rates: w.rates,
  windows: w.shares.length,
  medianShare: median([...w.shares]),
  minShare: Math.min(...w.shares),
}));
const results = {
  options: {
    CONCURRENCY,
    ROUNDS,
    DURATION_MS,
    MAX_UNITS,
    SWEEP,
    STEADY_MAX_UNITS,
    RATE,
    LIMIT,
    WINDOW_MS,
    WINDOWS,
  },
  runs,
  hotRatio: { ratio, spread },
  sweep: sweep.map(({ maxUnits, ratio, spread }) => ({ maxUnits, ratio, spread })),
  windows,
  underAdmission,
};
writeFileSync(new URL('./results.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);

const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d });
console.log(`One hot admitting scope, C=${CONCURRENCY}, ${ROUNDS} rounds of ${DURATION_MS} ms`);
console.log(
  '| prefetch | decisions/s (median) | ÷ no prefetch (per round) | Redis CPU µs/decision | script calls/decision |',
);
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const m of [0, ...SWEEP, MAX_UNITS]) {
  const r = of(m);
  const g = m === 0 ? undefined : gain(m);
  console.log(
    `| ${m === 0 ? 'no' : `maxUnits ${m}`} | ${fmt(median(r.map((x) => x.decisionsPerSec)))} | ${g === undefined ? '' : `${g.ratio.toFixed(1)}× (${g.perRound.map((x) => x.toFixed(1)).join(', ')})`} | ${median(r.map((x) => x.redisCpuUsPerDecision)).toFixed(2)} | ${median(r.map((x) => x.scriptCallsPerDecision)).toFixed(4)} |`,
  );
}
console.log(
  `ratio of medians at maxUnits ${MAX_UNITS}: ${ratio.toFixed(1)}× (per round ${perRound.map((x) => x.toFixed(1)).join(', ')})`,
);
console.log('');
console.log(`Steady load, open loop: limit ${LIMIT} per ${WINDOW_MS} ms, ${WINDOWS} windows`);
console.log(
  '| replicas (takes/s each) | prefetch | complete windows | admitted ÷ limit (median) | lowest window |',
);
console.log('| --- | --- | ---: | ---: | ---: |');
for (const u of underAdmission) {
  console.log(
    `| ${u.rates.map((r) => fmt(r)).join(' + ')} | ${u.prefetch ? 'yes' : 'no'} | ${u.windows} | ${(u.medianShare * 100).toFixed(2)} % | ${(u.minShare * 100).toFixed(2)} % |`,
  );
}
