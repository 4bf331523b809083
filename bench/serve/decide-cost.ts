/**
 * sluice's own work per decision in `sluice serve`, without gRPC: in this process, on a private
 * redis-server, `concurrency` callers each run a decoded request (the object proto-loader
 * gives the service) through the service's path — `readRequest`, the turn gate, the
 * `Decider` (matching, planning, the limiter's `takeAll`, the answer) and the metrics — for
 * `durationMs`. Prints decisions/s and CPU µs per decision of this process (the limiter and
 * its Redis client included), and the same for the limiter's own `takeAll` of the same items
 * (what a library user pays), so that the serve code's share is their difference.
 *
 * `--stub`: the limiter replaced by one that admits at once without Redis, so that what is
 * measured is the serve code alone (a deterministic A/B of its changes).
 *
 *   npm run build && node --import tsx bench/serve/decide-cost.ts [concurrency] [descriptors] [durationMs] [--stub]
 */
import { performance } from 'node:perf_hooks';
import { startRedisServer } from '../../src/demo/redis-server.js';
import { RateLimiter } from '../../src/index.js';
import { connectRedis } from '../../src/redis/node-redis/connect.js';
import { storeFor } from '../../src/redis/select.js';
import { Decider } from '../../src/serve/decide.js';
import { ServeMetrics } from '../../src/serve/metrics.js';
import { Policies } from '../../src/serve/policies.js';
import { readRequest } from '../../src/serve/request.js';
import { buildRuleSet } from '../../src/serve/rules/load.js';
import { answerSettings } from '../../src/serve/settings.js';
import { TurnGate } from '../../src/serve/turn-gate.js';
import type { TakeAllItem } from '../../src/types.js';

const STUB = process.argv.includes('--stub');
const [concurrency = 256, descriptors = 1, durationMs = 3000] = process.argv
  .slice(2)
  .filter((a) => !a.startsWith('--'))
  .map(Number);

/** A limiter that admits everything at once, without Redis (`--stub`). */
const admitted = (policy: { limit: number }) => ({
  allowed: true,
  remaining: policy.limit - 1,
  limit: policy.limit,
  resetMs: 3_600_000,
  retryAfterMs: 0,
});
const stub = {
  takeAll: (items: readonly TakeAllItem[]) =>
    Promise.resolve({
      allowed: true,
      decisions: items.map((item) => admitted(item.policy)),
      retryAfterMs: 0,
      cached: false,
    }),
  take: (_: unknown, policy: { limit: number }) => Promise.resolve(admitted(policy)),
  peek: (_: unknown, policy: { limit: number }) => Promise.resolve(admitted(policy)),
} as unknown as RateLimiter;

const RULES = `
domain: bench
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1000000000 }
  - key: route
    value: POST/orders
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 1000000000 }
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 1000000000 }
`;

/** A request as proto-loader decodes it (keepCase, defaults, longs and enums as strings). */
function decoded(): unknown {
  const user = `u${Math.floor(Math.random() * 10_000)}`;
  const d = (entries: [string, string][]) => ({
    entries: entries.map(([key, value]) => ({ key, value })),
    limit: null,
    hits_addend: null,
    is_negative_hits: false,
  });
  const all = [
    d([['user', user]]),
    d([
      ['route', 'POST/orders'],
      ['user', user],
    ]),
    d([['tenant', `t${Math.floor(Math.random() * 100)}`]]),
  ];
  return { descriptors: all.slice(0, descriptors), domain: 'bench', hits_addend: 0 };
}

const redis = await startRedisServer();
const client = await connectRedis({ url: redis.url });
try {
  const real = new RateLimiter({ client, namespace: 'serve', timeoutMs: 5000, maxInFlight: 5000 });
  await real.ready();
  const limiter = STUB ? stub : real;
  const policies = new Policies();
  const rules = buildRuleSet(
    { files: [{ name: 'bench.yaml', text: RULES }], digest: '' },
    false,
    policies,
  );
  const metrics = new ServeMetrics();
  const decider = new Decider({
    limiter,
    store: storeFor(client),
    settings: answerSettings({}, undefined),
    policies,
    rules: () => rules,
    onDescriptor: (domain, key, outcome, detail) =>
      metrics.descriptor(domain, key, outcome, detail),
  });
  const gate = new TurnGate();
  const serve = async () => {
    const started = performance.now();
    const request = readRequest(decoded());
    metrics.inFlight++;
    try {
      const response = await gate.run(() => decider.decide(request));
      metrics.request(
        response.overall_code === 'OK' ? 'ok' : 'over_limit',
        performance.now() - started,
      );
    } finally {
      metrics.inFlight--;
    }
  };
  const library = async () => {
    const request = readRequest(decoded());
    const items: TakeAllItem[] = request.descriptors.map((d) => {
      const match = rules.match(request.domain, d.entries);
      if (match === undefined) throw new Error('no rule');
      return {
        scope: { tenant: request.domain, route: JSON.stringify(match.counted) },
        policy: policies.ofRule(match.rule),
      };
    });
    await gate.run(() => limiter.takeAll(items));
  };
  /**
   * Slices of `durationMs / 10` each: the lowest CPU per decision of a slice (the least
   * disturbed by other processes on a shared machine) and the median.
   */
  const measure = async (name: string, one: () => Promise<void>) => {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let i = 0; i < 20; i++) await one(); // warm-up
      }),
    );
    const slices: number[] = [];
    let total = 0;
    const t00 = performance.now();
    for (let slice = 0; slice < 10; slice++) {
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      let calls = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (performance.now() - t0 < durationMs / 10) {
            await one();
            calls++;
          }
        }),
      );
      const cpu = process.cpuUsage(cpu0);
      slices.push((cpu.user + cpu.system) / calls);
      total += calls;
    }
    const seconds = (performance.now() - t00) / 1000;
    slices.sort((a, b) => a - b);
    console.log(
      `${name}: ${Math.round(total / seconds).toLocaleString('en-US')}/s, CPU per decision ${(slices[0] as number).toFixed(1)} µs lowest, ${(((slices[4] as number) + (slices[5] as number)) / 2).toFixed(1)} µs median (${concurrency} callers, ${descriptors} descriptors)`,
    );
  };
  await measure('serve path (readRequest, gate, Decider, metrics)', serve);
  await measure('limiter takeAll of the same items (gate)', library);
  await measure('serve path (readRequest, gate, Decider, metrics)', serve);
  await measure('limiter takeAll of the same items (gate)', library);
} finally {
  await client.close();
  await redis.stop();
}
