/**
 * What observing a decision costs in process, apart from Redis:
 * `node --import tsx bench/metrics/micro.ts [--rounds 7] [--decisions 1000000]`.
 *
 * One process, a MemoryStore-backed `RateLimiter` per variant (its scripts' in-memory twins,
 * so no network), one exhausted key: `cached` answers every take from the denial cache (the
 * cheapest decision sluice makes, where a fixed cost per decision weighs most); `store` has
 * the denial cache off, so every take runs the fixed-window twin through the coalescer and is
 * observed in the latency histogram, as a decision on Redis would be.
 * 256 takes in flight at once, as the harness's C=256. Variants, interleaved round by round:
 * `off` (no metrics), `noop` (a sink whose methods do nothing: what the core's events cost),
 * `prometheus` (`prometheusMetrics()`), `opentelemetry` (`openTelemetryMetrics()` on an SDK
 * `MeterProvider`). Prints a Markdown table of the median CPU ns per decision (process
 * user + system time), with the min–max over rounds, after one warm-up run of each.
 */
import { parseArgs } from 'node:util';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { Registry } from 'prom-client';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { openTelemetryMetrics } from '../../src/metrics/opentelemetry.js';
import { prometheusMetrics } from '../../src/metrics/prometheus.js';
import type { Metrics } from '../../src/metrics/types.js';
import { MemoryStore } from '../../src/stores/memory.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    decisions: { type: 'string', default: '1000000' },
  },
});
const rounds = Number(values.rounds);
const decisions = Number(values.decisions);
const C = 256;

const noop: Metrics = { decision() {}, request() {}, redisEvent() {}, attach() {} };
const variants: Record<string, () => Metrics | undefined> = {
  off: () => undefined,
  noop: () => noop,
  prometheus: () => prometheusMetrics({ registry: new Registry() }),
  opentelemetry: () => openTelemetryMetrics({ meterProvider: new MeterProvider() }),
};
const scenarios = ['cached', 'store'] as const;
const policy = fixedWindow({ name: 'orders', limit: 1, windowMs: 600_000 });

/** CPU ns per decision of one run. */
async function run(
  scenario: (typeof scenarios)[number],
  metrics: Metrics | undefined,
  count = decisions,
): Promise<number> {
  const limiter = new RateLimiter({
    store: new MemoryStore(),
    metrics,
    ...(scenario === 'store' ? { denialCache: false as const } : {}),
  });
  const scope = { tenant: 'hot', route: 'POST/orders' };
  await limiter.take(scope, policy);
  const before = process.cpuUsage();
  for (let i = 0; i < count; i += C) {
    const calls = [];
    for (let j = 0; j < C; j++) calls.push(limiter.take(scope, policy));
    await Promise.all(calls);
  }
  const used = process.cpuUsage(before);
  return ((used.user + used.system) * 1000) / count;
}

// Warm-up: every path compiled before anything is measured.
for (const scenario of scenarios) {
  for (const make of Object.values(variants)) await run(scenario, make(), decisions / 4);
}
const results = new Map<string, number[]>();
for (let round = 0; round < rounds; round++) {
  for (const scenario of scenarios) {
    // Rotate the order of the variants from round to round.
    const names = Object.keys(variants);
    const order = names.map((_, i) => names[(i + round) % names.length] as string);
    for (const name of order) {
      const ns = await run(scenario, (variants[name] as () => Metrics | undefined)());
      const key = `${scenario}\0${name}`;
      results.set(key, [...(results.get(key) ?? []), ns]);
    }
  }
  process.stderr.write(`round ${round + 1}/${rounds} done\n`);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};
console.log(`${decisions} decisions per run, C=${C}, ${rounds} rounds, Node ${process.version}\n`);
console.log('| scenario | variant | CPU ns/decision (median) | min–max | over off |');
console.log('| --- | --- | ---: | ---: | ---: |');
for (const scenario of scenarios) {
  const off = median(results.get(`${scenario}\0off`) ?? []);
  for (const name of Object.keys(variants)) {
    const xs = results.get(`${scenario}\0${name}`) ?? [];
    const m = median(xs);
    const over =
      name === 'off' ? '' : `+${(m - off).toFixed(0)} ns (${((m / off - 1) * 100).toFixed(0)} %)`;
    console.log(
      `| ${scenario} | ${name} | ${m.toFixed(0)} | ${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)} | ${over} |`,
    );
  }
}
