/**
 * A/B of two builds of sluice's decision path in one process: `node --import tsx
 * bench/path-ab.ts <distA> <distB> [concurrency] [rounds] [ms]`.
 *
 * Loads `RateLimiter`, `fixedWindow` and `connectRedis` from two built trees (e.g. a copy of
 * `dist/` made before a change, and `dist/`), and rate-limiter-flexible on ioredis as the
 * reference, all against one private redis-server; then alternates short closed loops of
 * each (random tenants, the `random` scenario), `rounds` times, in rotating order, so that
 * the machine's drift falls on all three alike. Prints, per contender, the median
 * decisions/s, Node CPU per decision (`process.cpuUsage`) and p50 latency, and the ratios
 * B÷A and each ÷ rate-limiter-flexible with their per-round ranges. Both builds share the
 * process, so each sees the other's garbage: compare them with each other, not with a
 * full bench run.
 */
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { startRedisServer } from '../src/demo/redis-server.js';
import { contender as rlf } from './contenders/rate-limiter-flexible.js';
import { getScenario } from './scenarios.js';

const [distA, distB, c = '1', r = '15', m = '400'] = process.argv.slice(2);
if (distA === undefined || distB === undefined) {
  throw new Error('usage: path-ab.ts <distA> <distB> [concurrency] [rounds] [ms]');
}
const concurrency = Number(c);
const rounds = Number(r);
const spanMs = Number(m);
const scenario = getScenario('random');

type Take = (tenant: string) => Promise<unknown>;

async function sluiceFrom(
  dir: string,
  url: string,
): Promise<{ take: Take; close(): Promise<void> }> {
  const root = pathToFileURL(`${resolve(dir)}/`);
  const lib = await import(new URL('index.js', root).href);
  const { connectRedis } = await import(new URL('redis/node-redis/connect.js', root).href);
  const client = await connectRedis({ url });
  const limiter = new lib.RateLimiter({ client });
  const policy = lib.fixedWindow(scenario.policy);
  return {
    take: (tenant) => limiter.take({ tenant, route: 'GET/bench' }, policy),
    close: () => client.close(),
  };
}

const redis = await startRedisServer();
try {
  const contenders: [string, { take: Take; close(): Promise<void> }][] = [
    ['A', await sluiceFrom(distA, redis.url)],
    ['B', await sluiceFrom(distB, redis.url)],
    ['rlf', await rlf.setup(redis.url, scenario.policy)],
  ];
  const results = new Map<string, { rate: number; cpu: number; p50: number }[]>();
  const loop = async (take: Take, ms: number) => {
    const latencies: number[] = [];
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const end = t0 + ms;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          const s = performance.now();
          await take(scenario.nextKey());
          latencies.push(performance.now() - s);
        }
      }),
    );
    const elapsed = performance.now() - t0;
    const used = process.cpuUsage(cpu0);
    latencies.sort((x, y) => x - y);
    return {
      rate: (latencies.length / elapsed) * 1000,
      cpu: (used.user + used.system) / latencies.length,
      p50: (latencies[latencies.length >> 1] ?? 0) * 1000,
    };
  };
  for (const [, { take }] of contenders) await loop(take, 300); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < contenders.length; i++) {
      const [name, { take }] = contenders[
        (i + round) % contenders.length
      ] as (typeof contenders)[0];
      const result = await loop(take, spanMs);
      results.set(name, [...(results.get(name) ?? []), result]);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] as number;
  const ratio = (
    x: string,
    y: string,
    f: (v: { rate: number; cpu: number; p50: number }) => number,
  ) => {
    const xs = results.get(x) ?? [];
    const ys = results.get(y) ?? [];
    const per = xs.map((v, i) => f(v) / f(ys[i] as typeof v)).sort((a, b) => a - b);
    return `${(median(xs.map(f)) / median(ys.map(f))).toFixed(3)} (${(per[Math.floor(per.length / 4)] as number).toFixed(2)}–${(per[Math.floor((per.length * 3) / 4)] as number).toFixed(2)} IQR)`;
  };
  for (const [name] of contenders) {
    const rs = results.get(name) ?? [];
    console.log(
      `${name}: ${median(rs.map((x) => x.rate)).toFixed(0)} dec/s, Node CPU ${median(rs.map((x) => x.cpu)).toFixed(2)} µs/dec, p50 ${median(rs.map((x) => x.p50)).toFixed(1)} µs`,
    );
  }
  console.log(
    `dec/s  B÷A ${ratio('B', 'A', (v) => v.rate)}; A÷rlf ${ratio('A', 'rlf', (v) => v.rate)}; B÷rlf ${ratio('B', 'rlf', (v) => v.rate)}`,
  );
  console.log(
    `CPU    B÷A ${ratio('B', 'A', (v) => v.cpu)}; A÷rlf ${ratio('A', 'rlf', (v) => v.cpu)}; B÷rlf ${ratio('B', 'rlf', (v) => v.cpu)}`,
  );
  console.log(
    `p50    B÷A ${ratio('B', 'A', (v) => v.p50)}; A÷rlf ${ratio('A', 'rlf', (v) => v.p50)}; B÷rlf ${ratio('B', 'rlf', (v) => v.p50)}`,
  );
  for (const [, { close }] of contenders) await close();
} finally {
  await redis.stop();
}
