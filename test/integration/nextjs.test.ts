/**
 * The Next.js recipe (docs/nextjs.md), its files in examples/nextjs/ imported as Next.js
 * loads them and called with real `NextRequest` objects (`next/server`) against a private
 * real Redis: the App Router route handler admits exactly its limit for every id and query of
 * its template, then answers `429` with `Retry-After`; the proxy's outer limit likewise,
 * continuing with `NextResponse.next()` — the proxy and the route each a fresh evaluation with
 * its own copy of sluice, as in two bundles; a module evaluated again (a hot reload) reuses the
 * one connection on globalThis; with the connection gone both answer `503` (fail-closed).
 * The files type-check as a Next.js app does (`moduleResolution: bundler`).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { NextRequest } from 'next/server.js';
import { fixedWindow, type RateLimiter } from 'sluice';
import type { RedisConnection } from 'sluice/node-redis';
import { tsImport } from 'tsx/esm/api';
import { ROOT } from '../helpers/docs.js';
import { keyFor, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const exec = promisify(execFile);

type RouteModule = {
  POST(request: Request, context: { params: Promise<{ id: string }> }): Promise<Response>;
};
type ProxyModule = {
  proxy(request: NextRequest): Promise<Response>;
  config: { matcher: string };
};
type LibModule = { redis: RedisConnection; limiter: RateLimiter };

/** Imports an example module through tsx, as a fresh evaluation of the file. */
const load = <T>(file: string): Promise<T> =>
  tsImport(join(ROOT, 'examples/nextjs', file), import.meta.url) as Promise<T>;

const slot = globalThis as typeof globalThis & { sluiceRedis?: Promise<RedisConnection> };
let route: RouteModule;
let proxy: ProxyModule;

after(async () => {
  const connection = await slot.sluiceRedis?.catch(() => undefined);
  if (connection?.isOpen) connection.destroy();
});

const post = (path: string, token?: string) =>
  new NextRequest(`http://localhost:3000${path}`, {
    method: 'POST',
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
const params = (id: string) => ({ params: Promise.resolve({ id }) });

describe('the Next.js recipe', () => {
  before(async () => {
    process.env.REDIS_URL = redis.server.url;
    route = await load<RouteModule>('app/api/orders/[id]/route.ts');
    proxy = await load<ProxyModule>('proxy.ts');
    // As a running app is: the script in Redis's cache. The recipe keeps sluice's 150-ms
    // deadline, which a first call (NOSCRIPT, then the script sent) can pass on a loaded
    // machine (one here answered 503). Another tenant's request, whatever its answer; the
    // route test counts this one of globex's 10.
    await route.POST(post('/api/orders/warm', 'token-of-globex'), params('warm'));
  });

  it('type-checks as a Next.js app (bundler resolution, next/server)', async () => {
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    await exec(process.execPath, [tsc, '-p', 'test/fixtures/nextjs/tsconfig.json'], {
      cwd: ROOT,
    });
  });

  it('route handler: exactly 10 per minute for the template, whatever the id or query; then 429 + Retry-After', async () => {
    assert.equal((await route.POST(post('/api/orders/1'), params('1'))).status, 401);
    for (let i = 0; i < 10; i++) {
      const res = await route.POST(
        post(`/api/orders/${i}?x=${i}`, 'token-of-acme'),
        params(`${i}`),
      );
      assert.equal(res.status, 201, `request ${i + 1}`);
      assert.deepEqual(await res.json(), { created: `${i}` });
      assert.equal(res.headers.get('ratelimit'), `"POST/api/orders/[id]";r=${9 - i};t=60`);
    }
    const limited = await route.POST(post('/api/orders/x', 'token-of-acme'), params('x'));
    assert.equal(limited.status, 429);
    assert.ok(['60', '61'].includes(limited.headers.get('retry-after') ?? ''));
    assert.equal(JSON.parse(await limited.text()).error, 'rate_limited');
    assert.equal(
      (await route.POST(post('/api/orders/1', 'token-of-globex'), params('1'))).status,
      201,
    );
    const key = keyFor(
      fixedWindow({ limit: 10, windowMs: 60_000 }),
      'acme',
      'POST/api/orders/[id]',
    );
    assert.equal(await (await redis.admin()).client.get(key), '10');
  });

  it('proxy: NextResponse.next() with the RateLimit headers, then 429 past the outer limit', async () => {
    assert.equal(proxy.config.matcher, '/api/:path*');
    for (let i = 0; i < 100; i++) {
      const res = await proxy.proxy(post(`/api/orders/${i}`, 'token-of-globex'));
      assert.equal(
        res.headers.get('x-middleware-next'),
        '1',
        `request ${i + 1}: ${res.status} ${await res.clone().text()}`,
      );
      if (i === 0) assert.equal(res.headers.get('ratelimit-policy'), '"api";q=100;w=10');
    }
    const limited = await proxy.proxy(post('/api/anything', 'token-of-globex'));
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('x-middleware-next'), null);
    assert.ok(['10', '11'].includes(limited.headers.get('retry-after') ?? ''));
    assert.deepEqual(JSON.parse(await limited.text())['violated-policies'], ['api']);
  });

  it('a module evaluated again (a hot reload, another bundle) reuses the one connection on globalThis', async () => {
    const first = await load<LibModule>('lib/sluice.ts');
    const again = await load<LibModule>('lib/sluice.ts');
    assert.notEqual(first.limiter, again.limiter, 'two evaluations, a limiter each');
    assert.equal(first.redis, again.redis);
    assert.equal(first.redis, await slot.sluiceRedis);
    const clients = await (await redis.admin()).client.sendCommand(['CLIENT', 'LIST']);
    // The admin connection and the recipe's: its command connection and its script connection.
    assert.equal(String(clients).trim().split('\n').length, 3, String(clients));
  });

  it('Redis gone, fail-closed: the route handler and the proxy answer 503 + Retry-After: 1', async () => {
    const { redis: connection } = await load<LibModule>('lib/sluice.ts');
    connection.destroy();
    const res = await route.POST(post('/api/orders/1', 'token-of-globex'), params('1'));
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(JSON.parse(await res.text()).error, 'rate_limiter_unavailable');
    const proxied = await proxy.proxy(post('/api/orders/1', 'token-of-acme'));
    assert.equal(proxied.status, 503);
    assert.equal(proxied.headers.get('x-middleware-next'), null);
  });
});
