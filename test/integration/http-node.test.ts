/**
 * The node:http adapter on a real server on loopback, against a real Redis,
 * and the HTTP parts of cases C01, C06, C07, C08.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Policy } from 'sluice';
import { fixedWindow, RateLimiter } from 'sluice';
import { type NodeRateLimitOptions, withRateLimit } from 'sluice/node';
import { issueToken, verifiedTenant } from '../../src/demo/identity.js';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const secret = 'test-secret';
const servers: Server[] = [];
const ownServers: PrivateRedis[] = [];
after(async () => {
  for (const server of servers) server.close();
  for (const own of ownServers) await own.stop();
});

interface App {
  url: string;
  handled: () => number;
  post: (
    tenant: string,
    path?: string,
    headers?: Record<string, string>,
  ) => Promise<{ status: number; retryAfter: string | null; body: { error?: string } }>;
}

async function app(
  limiter: RateLimiter,
  policy: Policy,
  extra: Partial<NodeRateLimitOptions> = {},
): Promise<App & { counts: () => Record<string, number> }> {
  let handled = 0;
  const outcomes: Record<string, number> = {};
  const guarded = withRateLimit(
    {
      limiter,
      policy,
      route: 'POST/orders',
      identify: (req: IncomingMessage) => verifiedTenant(secret, req),
      onOutcome: (event) => {
        outcomes[event.outcome] = (outcomes[event.outcome] ?? 0) + 1;
      },
      ...extra,
    },
    (_req, res) => {
      handled++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    },
  );
  const server = createServer(guarded);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return {
    url,
    handled: () => handled,
    counts: () => outcomes,
    post: async (tenant, path = '/orders', headers = {}) => {
      const res = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${issueToken(secret, tenant)}`, ...headers },
      });
      return {
        status: res.status,
        retryAfter: res.headers.get('retry-after'),
        body: (await res.json()) as { error?: string },
      };
    },
  };
}

/** POST /orders as `tenant` (a verified token), the whole response left to the caller. */
const postAs = (url: string, tenant: string) =>
  fetch(`${url}/orders`, {
    method: 'POST',
    headers: { authorization: `Bearer ${issueToken(secret, tenant)}` },
  });

describe('node:http adapter', () => {
  it('allowed runs the handler; limited → 429 + Retry-After + JSON, handler never run', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const a = await app(limiter, fixedWindow({ limit: 3, windowMs: 60_000 }));
    const tenant = randomTenant();
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await a.post(tenant));
    assert.deepEqual(
      results.map((r) => r.status),
      [200, 200, 200, 429, 429],
    );
    assert.equal(a.handled(), 3);
    const limited = results[3];
    assert.ok(limited);
    assert.ok(['60', '61'].includes(limited.retryAfter ?? ''), `Retry-After ${limited.retryAfter}`);
    assert.equal(limited.body.error, 'rate_limited');
    assert.deepEqual(a.counts(), { allowed: 3, limited: 2 });
  });

  it('query-string variants share one quota (the route template names it)', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const a = await app(limiter, fixedWindow({ limit: 2, windowMs: 60_000 }));
    const tenant = randomTenant();
    const statuses = [];
    for (const q of ['?x=1', '?x=2', '?x=3', '?y=4'])
      statuses.push((await a.post(tenant, `/orders${q}`)).status);
    assert.deepEqual(statuses, [200, 200, 429, 429]);
  });

  it('the tenant comes from the verified identity; client headers cannot mint fresh quotas', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const a = await app(limiter, fixedWindow({ limit: 2, windowMs: 60_000 }));
    const tenant = randomTenant();
    const statuses = [];
    for (let i = 0; i < 5; i++) {
      statuses.push(
        (
          await a.post(tenant, '/orders', {
            'x-tenant': `spoof-${i}`,
            'x-forwarded-for': `10.0.0.${i}`,
          })
        ).status,
      );
    }
    assert.deepEqual(statuses, [200, 200, 429, 429, 429]);
    const forged = await fetch(`${a.url}/orders`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant}.forged` },
    });
    assert.equal(forged.status, 401);
    await forged.arrayBuffer();
    assert.equal(a.handled(), 2);
  });

  it('case C06 (HTTP): a route whose cost is above the limit never answers 200', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const a = await app(limiter, fixedWindow({ limit: 10, windowMs: 60_000 }), { cost: 11 });
    const r = await a.post(randomTenant());
    assert.equal(r.status, 429);
    assert.equal(r.retryAfter, null);
    assert.equal(r.body.error, 'cost_exceeds_limit');
    assert.equal(a.handled(), 0);
  });

  it('case C07 (HTTP): fixed window 1 per 1500 ms → 429 with Retry-After: 2; after waiting it, 200', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const a = await app(limiter, fixedWindow({ limit: 1, windowMs: 1500 }));
    const tenant = randomTenant();
    assert.equal((await a.post(tenant)).status, 200);
    const denied = await a.post(tenant);
    assert.equal(denied.status, 429);
    assert.equal(denied.retryAfter, '2');
    await sleep(2000);
    assert.equal((await a.post(tenant)).status, 200);
  });

  it('case C08: Redis stopped, fail-closed → 100 concurrent requests all 503 + Retry-After: 1, handler 0; restart → 200, 200, 200, 429', async () => {
    const server = await startRedisServer();
    ownServers.push(server);
    const client = await redis.client({ url: server.url, reconnect: true });
    const limiter = new RateLimiter({ client, timeoutMs: 200 });
    const a = await app(limiter, fixedWindow({ limit: 3, windowMs: 60_000 }));
    await server.kill();
    const started = performance.now();
    const results = await Promise.all(Array.from({ length: 100 }, () => a.post(randomTenant())));
    const elapsed = performance.now() - started;
    assert.ok(
      results.every((r) => r.status === 503 && r.retryAfter === '1'),
      JSON.stringify(results[0]),
    );
    assert.equal(a.handled(), 0);
    assert.ok(elapsed < 2000, `answered in ${elapsed.toFixed(0)} ms`);
    assert.equal(a.counts()['fail-closed'], 100);
    await server.restart();
    const deadline = Date.now() + 5000;
    while (!client.isReady && Date.now() < deadline) await sleep(20);
    const tenant = randomTenant();
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await a.post(tenant)).status);
    assert.deepEqual(statuses, [200, 200, 200, 429]);
  });

  it('case C08 (CLIENT PAUSE variant): every request is 503 within about the deadline', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 200 });
    const a = await app(limiter, fixedWindow({ limit: 3, windowMs: 60_000 }));
    const admin = await redis.admin();
    // Paused well past the deadline: answered long before the pause ends, even on a loaded
    // machine (a run under load took 1.27 s for what takes 0.3 s idle).
    await admin.client.sendCommand(['CLIENT', 'PAUSE', '3000', 'ALL']);
    const started = performance.now();
    const results = await Promise.all(Array.from({ length: 100 }, () => a.post(randomTenant())));
    const elapsed = performance.now() - started;
    assert.ok(results.every((r) => r.status === 503 && r.retryAfter === '1'));
    assert.equal(a.handled(), 0);
    assert.ok(
      elapsed < 2500,
      `answered in ${elapsed.toFixed(0)} ms while Redis was paused for 3000 ms`,
    );
    await sleep(3100);
  });

  it('fail-open admits through the local fallback limit only, counted as fail-open', async () => {
    const client = await redis.client();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const a = await app(limiter, fixedWindow({ limit: 100, windowMs: 60_000 }), {
      failureMode: 'fail-open',
      failOpenLimit: 3,
    });
    client.destroy();
    const tenant = randomTenant();
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await a.post(tenant)).status);
    assert.deepEqual(statuses, [200, 200, 200, 503, 503]);
    assert.equal(a.handled(), 3);
    assert.deepEqual(a.counts(), { 'fail-open': 3, 'fail-open-limited': 2 });
  });

  it('fail-open without a local limit is refused at configuration time', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    await assert.rejects(
      app(limiter, fixedWindow({ limit: 1, windowMs: 1000 }), { failureMode: 'fail-open' }),
      {
        field: 'failOpenLimit',
      },
    );
  });

  it('no verified identity → 401, nothing counted against any quota', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const a = await app(limiter, fixedWindow({ limit: 1, windowMs: 1000 }));
    const res = await fetch(`${a.url}/orders`, { method: 'POST' });
    assert.equal(res.status, 401);
    await res.arrayBuffer();
    assert.equal(limiter.stats().allowed + limiter.stats().limited, 0);
  });

  it('RateLimit-Policy / RateLimit (draft-08) on admitted and limited responses; t matches Retry-After', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const a = await app(limiter, fixedWindow({ limit: 2, windowMs: 60_000 }), {
      headers: { legacy: true },
    });
    const tenant = randomTenant();
    const send = () => postAs(a.url, tenant);
    const first = await send();
    await first.arrayBuffer();
    assert.equal(first.headers.get('ratelimit-policy'), '"POST/orders";q=2;w=60');
    assert.match(first.headers.get('ratelimit') ?? '', /^"POST\/orders";r=1;t=(59|60)$/);
    assert.equal(first.headers.get('x-ratelimit-limit'), '2');
    assert.equal(first.headers.get('x-ratelimit-remaining'), '1');
    assert.ok(
      Number(first.headers.get('x-ratelimit-reset')) <= 60,
      'Reset is delta seconds, never an epoch',
    );
    await (await send()).arrayBuffer();
    const limited = await send();
    await limited.arrayBuffer();
    assert.equal(limited.status, 429);
    const t = /;t=(\d+)$/.exec(limited.headers.get('ratelimit') ?? '')?.[1];
    assert.equal(t, limited.headers.get('retry-after'));
    assert.match(limited.headers.get('ratelimit') ?? '', /;r=0;/);
  });

  it('a named policy names its quota in RateLimit-Policy, and every outcome event carries the name', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const events: string[] = [];
    const a = await app(
      limiter,
      fixedWindow({ limit: 1, windowMs: 60_000, name: 'orders-per-minute' }),
      {
        onOutcome: (event) => events.push(`${event.outcome}:${event.policy}`),
      },
    );
    const tenant = randomTenant();
    const send = () => postAs(a.url, tenant);
    const first = await send();
    await first.arrayBuffer();
    assert.equal(first.headers.get('ratelimit-policy'), '"orders-per-minute";q=1;w=60');
    const limited = await send();
    await limited.arrayBuffer();
    assert.match(limited.headers.get('ratelimit') ?? '', /^"orders-per-minute";r=0;t=\d+$/);
    assert.deepEqual(events, ['allowed:orders-per-minute', 'limited:orders-per-minute']);
  });

  it('no rate-limit headers with headers: false, and none invented when the limiter failed', async () => {
    const client = await redis.client();
    const quiet = await app(
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }),
      fixedWindow({ limit: 2, windowMs: 60_000 }),
      { headers: false },
    );
    const ok = await fetch(`${quiet.url}/orders`, {
      method: 'POST',
      headers: { authorization: `Bearer ${issueToken(secret, randomTenant())}` },
    });
    await ok.arrayBuffer();
    assert.equal(ok.headers.get('ratelimit'), null);
    client.destroy();
    const failing = await app(
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }),
      fixedWindow({ limit: 2, windowMs: 60_000 }),
    );
    const down = await fetch(`${failing.url}/orders`, {
      method: 'POST',
      headers: { authorization: `Bearer ${issueToken(secret, randomTenant())}` },
    });
    await down.arrayBuffer();
    assert.equal(down.status, 503);
    assert.equal(down.headers.get('ratelimit'), null);
    assert.equal(down.headers.get('ratelimit-policy'), null);
  });

  it('shadow mode: decides and counts, never blocks, and names the would-be decision', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const a = await app(limiter, fixedWindow({ limit: 2, windowMs: 60_000 }), {
      shadow: true,
      shadowHeader: 'x-ratelimit-shadow',
    });
    const tenant = randomTenant();
    const seen: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${a.url}/orders`, {
        method: 'POST',
        headers: { authorization: `Bearer ${issueToken(secret, tenant)}` },
      });
      await res.arrayBuffer();
      assert.equal(res.status, 200);
      seen.push(res.headers.get('x-ratelimit-shadow') ?? '');
    }
    assert.deepEqual(seen, ['allowed', 'allowed', 'limited', 'limited', 'limited']);
    assert.equal(a.handled(), 5);
    assert.deepEqual(a.counts(), { allowed: 2, limited: 3 });
  });

  it('shadow mode with the limiter failing: the request goes through, counted, marked unavailable', async () => {
    const client = await redis.client();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const a = await app(limiter, fixedWindow({ limit: 2, windowMs: 60_000 }), {
      shadow: true,
      shadowHeader: 'x-ratelimit-shadow',
    });
    client.destroy();
    const res = await fetch(`${a.url}/orders`, {
      method: 'POST',
      headers: { authorization: `Bearer ${issueToken(secret, randomTenant())}` },
    });
    await res.arrayBuffer();
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-ratelimit-shadow'), 'unavailable');
    assert.deepEqual(a.counts(), { 'fail-closed': 1 });
  });

  it('a malformed shadow header name is refused when the guard is made', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    await assert.rejects(
      app(limiter, fixedWindow({ limit: 1, windowMs: 1000 }), {
        shadow: true,
        shadowHeader: 'x bad',
      }),
      {
        field: 'shadowHeader',
      },
    );
  });

  it('an onOutcome that throws never changes the answer', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const a = await app(limiter, fixedWindow({ limit: 1, windowMs: 60_000 }), {
      onOutcome: () => {
        throw new Error('observer bug');
      },
    });
    const tenant = randomTenant();
    assert.equal((await a.post(tenant)).status, 200);
    assert.equal((await a.post(tenant)).status, 429);
  });

  it('a throwing onError still gets a 500; a handler failing after writeHead ends the exchange', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const broken = withRateLimit(
        {
          limiter,
          policy: fixedWindow({ limit: 100, windowMs: 60_000 }),
          route: 'POST/orders',
          identify: () => {
            throw new Error('identify bug');
          },
          onError: () => {
            throw new Error('onError bug');
          },
        },
        () => {},
      );
      const half = withRateLimit(
        {
          limiter,
          policy: fixedWindow({ limit: 100, windowMs: 60_000 }),
          route: 'POST/orders',
          identify: () => 'acme',
        },
        (_req, res) => {
          res.writeHead(200);
          throw new Error('handler bug after writeHead');
        },
      );
      const server = createServer((req, res) =>
        req.url === '/half' ? half(req, res) : broken(req, res),
      );
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const address = server.address();
      const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
      const res = await fetch(`${base}/orders`, { method: 'POST' });
      assert.equal(res.status, 500);
      await res.arrayBuffer();
      const outcome = await fetch(`${base}/half`, { method: 'POST' }).then(
        (r) =>
          r.arrayBuffer().then(
            () => 'ended',
            () => 'reset',
          ),
        () => 'reset',
      );
      assert.ok(outcome === 'ended' || outcome === 'reset', 'the response did not hang');
      await sleep(20);
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('case C01 (HTTP): after SCRIPT FLUSH a fail-closed route keeps answering 200', async () => {
    // A deadline far above a loaded machine's EVAL of the batch script: NOSCRIPT is under test.
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 2000 });
    const a = await app(limiter, fixedWindow({ limit: 100, windowMs: 60_000 }));
    const tenant = randomTenant();
    assert.equal((await a.post(tenant)).status, 200);
    await (await redis.admin()).client.scriptFlush();
    const results = await Promise.all(Array.from({ length: 50 }, () => a.post(tenant)));
    assert.deepEqual(
      results.map((r) => r.status),
      results.map(() => 200),
    );
  });
});
