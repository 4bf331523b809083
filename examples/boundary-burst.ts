import { fixedWindow, MemoryStore, RateLimiter, slidingWindowLog } from 'sluice';

// The same algorithms in process, on a clock you control (for tests and single processes).
let now = Date.UTC(2026, 0, 1); // ms since the epoch
const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => now }) });
const scope = { tenant: 'acme', route: 'POST/orders' };

// 10 per second, and 20 takes: 1 at 0 ms, 9 at 999 ms, 10 at 1001 ms.
for (const policy of [
  fixedWindow({ limit: 10, windowMs: 1000 }),
  slidingWindowLog({ limit: 10, windowMs: 1000 }),
]) {
  const start = now;
  const admitted: string[] = [];
  for (const [at, takes] of [
    [0, 1],
    [999, 9],
    [1001, 10],
  ] as const) {
    now = start + at;
    let count = 0;
    for (let i = 0; i < takes; i++) if ((await limiter.take(scope, policy)).allowed) count++;
    admitted.push(`${count} at ${at} ms`);
  }
  console.log(`${policy.algorithm}: admitted ${admitted.join(', ')}`);
  now += 60_000;
}
