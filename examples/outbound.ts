import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { gcra, RateLimiter } from 'sluice';
import { connectRedis } from 'sluice/node-redis';

// A third-party API shared by 4 worker processes: it allows 20 calls per second over all of
// them and answers 429 above that. The workers wait for a slot of one fleet-wide policy (one
// call every 50 ms) instead of calling and being refused.
const api = gcra({ name: 'partner-api', limit: 20, periodMs: 1000, burst: 1 });
const RUN_MS = 3000;

if (process.env.API_URL !== undefined) {
  // A worker: 5 callers, each calling the API whenever the policy admits it.
  const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
  const limiter = new RateLimiter({ client: redis, timeoutMs: 1000 });
  const scope = { tenant: 'partner' };
  await limiter.ready();
  console.log('ready');
  // Every worker starts at the time the main process sends, once all are ready.
  const [line] = await once(createInterface({ input: process.stdin }), 'line');
  const start = Number(line);
  const end = start + RUN_MS;
  await new Promise((resolve) => setTimeout(resolve, start - Date.now()));
  let calls = 0;
  const caller = async () => {
    while (Date.now() < end) {
      const maxWaitMs = Math.max(0, end - Date.now());
      const call = () => fetch(process.env.API_URL as string, { method: 'POST' });
      try {
        const result = await limiter.schedule(scope, api, call, { maxWaitMs });
        if (result.admitted) calls++;
      } catch (error) {
        console.error(`a call failed: ${error}`); // a limiter or API failure: try again
      }
    }
  };
  await Promise.all([caller(), caller(), caller(), caller(), caller()]);
  console.log(calls);
  await redis.close();
} else {
  // The fake API: a token bucket of 20 calls, refilled at 20 per second.
  let tokens = 20;
  let at = performance.now();
  let accepted = 0;
  let refused = 0;
  let first = 0;
  let last = 0;
  const server = createServer((_req, res) => {
    const now = performance.now();
    tokens = Math.min(20, tokens + ((now - at) * 20) / 1000);
    at = now;
    if (tokens >= 1) {
      tokens--;
      accepted++;
      if (accepted === 1) first = now;
      last = now;
      res.writeHead(200).end();
    } else {
      refused++;
      res.writeHead(429).end();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const workers = Array.from({ length: 4 }, () => {
    const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], {
      env: { ...process.env, API_URL: url },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    return { child, lines };
  });
  for (const { lines } of workers) await lines.next(); // "ready"
  const startAt = Date.now() + 100;
  for (const { child } of workers) child.stdin.end(`${startAt}\n`);
  const counts = workers.map(async ({ lines }) => Number((await lines.next()).value));
  const calls = (await Promise.all(counts)).reduce((a, b) => a + b, 0);
  // The rate from the first call to the last: N calls, N − 1 intervals.
  const perSecond = (((accepted - 1) * 1000) / (last - first)).toFixed(1);
  console.log(
    `4 workers called ${calls} times; the API accepted ${accepted} (${perSecond}/s) and refused ${refused}`,
  );
  server.close();
}
