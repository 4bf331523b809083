/**
 * What retry-safety and pricing at the end cost: Node.js CPU, Redis CPU and Redis commands
 * per operation, on a private redis-server, for
 * - a take, and a take with an `id` (its answer recorded: a GET and a SET more);
 * - two takes (what a caller without settle does: a take, then a second take or a
 *   compensating call), and a reserve then its settle.
 *
 * Closed loop: `CONCURRENCY` operations in flight from one process (coalesced as the limiter
 * does), `OPS` operations per scenario after a warm-up, a fresh tenant per operation so no
 * scope is ever denied. Run: `npm run bench:priced` (env OPS, CONCURRENCY).
 */
import { fixedWindow, type Policy, RateLimiter, tokenBucket } from 'sluice';
import { connectRedis } from 'sluice/node-redis';
import { startRedisServer } from '../../src/demo/redis-server.js';
import { diffSnapshots, parseInfo, type RedisSnapshot } from '../redis-stats.js';

const OPS = Number(process.env.OPS ?? 20_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 64);

const server = await startRedisServer();
const client = await connectRedis({ url: server.url });
const admin = await connectRedis({ url: server.url, fastPath: false });
const limiter = new RateLimiter({ client, denialCache: false });

type Operation = (i: number) => Promise<unknown>;

const policies: Policy[] = [
  fixedWindow({ limit: 1000, windowMs: 60_000 }),
  tokenBucket({ capacity: 1000, refillTokens: 1000, refillIntervalMs: 60_000 }),
];

function scenarios(policy: Policy): [string, Operation][] {
  const scope = (i: number) => ({ tenant: `t${i % 10_000}`, route: `r${Math.floor(i / 10_000)}` });
  let run = 0;
  return [
    ['take', (i) => limiter.take(scope(i), policy)],
    ['take with id', (i) => limiter.take(scope(i), policy, { id: `op-${run}-${i}` })],
    [
      'two takes',
      async (i) => {
        await limiter.take(scope(i), policy);
        await limiter.take(scope(i), policy);
      },
    ],
    [
      'reserve + settle',
      async (i) => {
        const r = await limiter.reserve(scope(i), policy, { cost: 2, id: `rsv-${run++}-${i}` });
        await r.settle(1);
      },
    ],
  ];
}

async function snapshot(): Promise<RedisSnapshot> {
  return parseInfo(String(await admin.client.sendCommand(['INFO', 'cpu', 'commandstats'])));
}

async function loop(operation: Operation, count: number, offset: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await operation(offset + next++);
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

let offset = 0;
const rows: string[] = [];
for (const policy of policies) {
  for (const [name, operation] of scenarios(policy)) {
    await loop(operation, Math.min(2000, OPS), offset); // warm-up
    offset += OPS;
    await admin.client.sendCommand(['FLUSHDB']); // the private server only
    const before = await snapshot();
    const cpu = process.cpuUsage();
    const started = performance.now();
    await loop(operation, OPS, offset);
    const elapsed = performance.now() - started;
    const used = process.cpuUsage(cpu);
    const redis = diffSnapshots(before, await snapshot());
    offset += OPS;
    rows.push(
      `| ${policy.algorithm} | ${name} | ${Math.round((OPS / elapsed) * 1000)} | ${((used.user + used.system) / OPS).toFixed(1)} | ${(redis.cpuUs / OPS).toFixed(1)} | ${(redis.calls / OPS).toFixed(1)} |`,
    );
  }
}
console.log(`${OPS} operations per scenario, ${CONCURRENCY} in flight, one process`);
console.log(
  '| policy | operation | ops/s | Node CPU µs/op | Redis CPU µs/op | Redis commands/op |',
);
console.log('| --- | --- | ---: | ---: | ---: | ---: |');
for (const row of rows) console.log(row);
await client.close();
await admin.close();
await server.stop();
