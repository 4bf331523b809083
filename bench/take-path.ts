/**
 * The Node.js side of a plain take with no Redis in the way: `node --import tsx
 * bench/take-path.ts [src dir] [concurrency] [decisions] [rounds]`.
 *
 * A `RateLimiter` from `<src dir>` (default this checkout's `src/`; another worktree's to
 * compare two commits) on a store that answers every script call in the next turn
 * (`setImmediate`) with "admitted" for each item, a `fixedWindow` policy, random tenants, a
 * closed loop of `concurrency` callers. Prints this process's CPU per decision for each
 * round: validation, targets and keys, the denial cache, the call object, the coalescer, the
 * batch wire and the reply decode — everything a take costs in Node.js but the Redis client.
 */
import { pathToFileURL } from 'node:url';

const [src = new URL('../src/', import.meta.url).pathname, c = '16', n = '200000', rounds = '5'] =
  process.argv.slice(2);
const lib = await import(pathToFileURL(`${src.replace(/\/$/, '')}/index.ts`).href);
const concurrency = Number(c);
const decisions = Number(n);

const admitted = [1, 9, 60000, 0];
const store = {
  evalScript(_script: unknown, keys: readonly string[]): Promise<unknown> {
    const reply: number[] = [];
    for (let j = 0; j < keys.length; j++) reply.push(...admitted);
    return new Promise((resolve) => setImmediate(() => resolve(reply)));
  },
};
const limiter = new lib.RateLimiter({ store, timeoutMs: 60000 });
const policy = lib.fixedWindow({ limit: 10, windowMs: 60000 });
const route = 'GET/bench';

const run = async (count: number) => {
  let left = count;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left-- > 0) {
        await limiter.take({ tenant: `t${Math.floor(Math.random() * 1e9)}`, route }, policy);
      }
    }),
  );
};
await run(20000);
const out: string[] = [];
for (let r = 0; r < Number(rounds); r++) {
  const before = process.cpuUsage();
  await run(decisions);
  const used = process.cpuUsage(before);
  out.push(((used.user + used.system) / decisions).toFixed(2));
}
console.log(`C=${concurrency}: Node CPU µs/decision ${out.join(', ')}`);
