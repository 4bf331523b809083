/**
 * The gRPC load generator of `bench/serve/run.ts`, run as a process of its own: `concurrency`
 * callers, each sending `ShouldRateLimit` calls back to back (unary calls multiplexed as
 * HTTP/2 streams over `channels` connections) for `durationMs`, each call with `descriptors`
 * descriptors of a random user. Prints one JSON line: calls, errors, decisions per second,
 * p50/p99 in µs, the generator's own CPU in µs.
 *
 *   node --import tsx bench/serve/load.ts <port> <concurrency> <descriptors> <durationMs>
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { LatencyRecorder } from '../latency.js';
import { printResult } from './load-result.js';

const [port, concurrency, descriptors, durationMs] = process.argv.slice(2).map(Number) as [
  number,
  number,
  number,
  number,
];
const root = fileURLToPath(new URL('../../src/serve/proto/', import.meta.url));
const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  includeDirs: [join(root)],
});
const Service = (
  grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
  }
).envoy.service.ratelimit.v3.RateLimitService;
const channels = Math.min(4, concurrency);
const clients = Array.from(
  { length: channels },
  (_, i) =>
    new Service(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
      'grpc.channel_id': i, // distinct channels, not one shared subchannel
    }) as unknown as Record<string, (...a: unknown[]) => void>,
);

function request() {
  const user = `u${Math.floor(Math.random() * 10_000)}`;
  const all = [
    [{ key: 'user', value: user }],
    [
      { key: 'route', value: 'POST/orders' },
      { key: 'user', value: user },
    ],
    [{ key: 'tenant', value: `t${Math.floor(Math.random() * 100)}` }],
  ];
  return {
    domain: 'bench',
    descriptors: all.slice(0, descriptors).map((entries) => ({ entries })),
  };
}

const call = (client: Record<string, (...a: unknown[]) => void>) =>
  new Promise<string>((resolve, reject) => {
    client.ShouldRateLimit?.(
      request(),
      { deadline: Date.now() + 1000 },
      (error: Error | null, r: { overall_code: string }) =>
        error ? reject(error) : resolve(r.overall_code),
    );
  });

const latencies = new LatencyRecorder(1 << 16);
let errors = 0;
let over = 0;
// Warm up the connections and the server's caches.
await Promise.all(clients.map((c) => call(c).catch(() => {})));
const cpu0 = process.cpuUsage();
const started = performance.now();
const end = started + durationMs;
await Promise.all(
  Array.from({ length: concurrency }, async (_, i) => {
    const client = clients[i % channels] as (typeof clients)[0];
    while (performance.now() < end) {
      const t = performance.now();
      try {
        if ((await call(client)) !== 'OK') over++;
        latencies.record(performance.now() - t);
      } catch {
        errors++;
      }
    }
  }),
);
printResult(latencies, { errors, over }, started, cpu0);
for (const c of clients) (c as unknown as grpc.Client).close();
