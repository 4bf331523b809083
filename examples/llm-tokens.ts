import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RateLimiter, tokenBucket } from 'sluice';
import { connectRedis } from 'sluice/node-redis';

// A tenant's LLM tokens per minute, priced when each call ends: reserve max_tokens before the
// call, settle the usage the model reports after it. Three replicas share the quota on Redis.
const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const tokensPerMinute = tokenBucket({
  name: 'llm-tokens',
  capacity: 10_000,
  refillTokens: 10_000,
  refillIntervalMs: 60_000,
});

// A fake model server: every completion uses 700 tokens, whatever max_tokens allowed.
const model = createServer((_req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ text: '…', usage: { total_tokens: 700 } }));
});
await new Promise<void>((resolve) => model.listen(0, '127.0.0.1', resolve));
const modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1/completions`;

const replicas = await Promise.all(
  [1, 2, 3].map(async () => {
    const client = await connectRedis({ url });
    // A model call takes seconds: a 1-s deadline on the limiter's own calls costs nothing
    // beside it (the default 150 ms suits a limiter in front of fast requests).
    return { client, limiter: new RateLimiter({ client, timeoutMs: 1_000 }) };
  }),
);

/** One completion on one replica: reserve, call, settle (or cancel when the call fails). */
async function complete(limiter: RateLimiter, tenant: string, maxTokens: number) {
  const scope = { tenant, route: 'POST/v1/completions' };
  const reservation = await limiter.reserve(scope, tokensPerMinute, { cost: maxTokens });
  if (!reservation.allowed) return { status: 429, retryAfterMs: reservation.retryAfterMs };
  try {
    const res = await fetch(modelUrl, { method: 'POST', body: JSON.stringify({ maxTokens }) });
    const { usage } = (await res.json()) as { usage: { total_tokens: number } };
    const settled = await reservation.settle(usage.total_tokens);
    return { status: 200, used: usage.total_tokens, gaveBack: -settled.applied };
  } catch (error) {
    await reservation.cancel(); // nothing was used: all of it back
    throw error;
  }
}

// Six calls at once, two per replica, each reserving max_tokens 2,000: 5 fit in 10,000.
const results = await Promise.all(
  Array.from({ length: 6 }, (_, i) =>
    complete((replicas[i % 3] as (typeof replicas)[number]).limiter, 'acme', 2_000),
  ),
);
const ok = results.filter((r) => r.status === 200);
console.log(`${ok.length} of 6 calls reserved 2000 tokens each; ${6 - ok.length} got 429`);
console.log(`each used 700 and gave back ${ok.map((r) => r.gaveBack).join(', ')}`);
const left = await replicas[0]?.limiter.peek(
  { tenant: 'acme', route: 'POST/v1/completions' },
  tokensPerMinute,
);
// 10,000 − 5 × 700 = 6,500 (plus what refilled while this ran: about 1.7 tokens per 10 ms)
console.log(`tokens left: ${Math.floor((left?.remaining ?? 0) / 100) * 100} and some`);

for (const { client } of replicas) await client.close();
model.close();
