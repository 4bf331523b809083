/**
 * The README's examples run as written. Each example in the README is preceded by
 * `<!-- example: examples/<file> -->` and must equal that file byte for byte; every file in
 * `examples/` (bar the demo's own) must be shown that way; and each file is run here — as a
 * user would, `node --import tsx examples/<file>`, importing `sluice` — against a private
 * Redis, then driven over HTTP.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';

const root = new URL('../../', import.meta.url);
const readme = readFileSync(new URL('README.md', root), 'utf8');
const NOT_IN_README = new Set(['demo-policies.json', 'redis.compose.yaml']);
const running: { child: ChildProcess; redis: PrivateRedis }[] = [];
after(async () => {
  for (const { child, redis } of running) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
    await redis.stop();
  }
});

/** The README's example blocks: file → the block's text. */
function readmeExamples(): Map<string, string> {
  const blocks = new Map<string, string>();
  const marker = /<!-- example: (examples\/[^ ]+) -->\n```[a-z]*\n([\s\S]*?)```\n/g;
  for (const match of readme.matchAll(marker)) blocks.set(match[1] as string, match[2] as string);
  return blocks;
}

/** Starts `examples/<file>` on a free port against a fresh private Redis; resolves when it serves. */
async function start(file: string): Promise<{ base: string; output: () => string }> {
  const redis = await startRedisServer();
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', `examples/${file}`], {
    cwd: root,
    env: { ...process.env, REDIS_URL: redis.url, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push({ child, redis });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) assert.fail(`examples/${file} exited:\n${output}`);
    if (Date.now() > deadline)
      assert.fail(`examples/${file} did not serve within 20 s:\n${output}`);
    try {
      await (await fetch(base, { method: 'HEAD' })).arrayBuffer();
      return { base, output: () => output };
    } catch {
      await sleep(50);
    }
  }
}

/** Runs `examples/<file>` to its end against a fresh private Redis; resolves what it printed. */
async function printed(file: string): Promise<string> {
  const redis = await startRedisServer();
  const child = spawn(process.execPath, ['--import', 'tsx', `examples/${file}`], {
    cwd: root,
    env: { ...process.env, REDIS_URL: redis.url },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  running.push({ child, redis });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 0, `examples/${file} exit code`);
  return output;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function post(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers });
  await res.arrayBuffer();
  return res;
}

/** 10 per minute for acme across query-string variants, then 429; other tenants unaffected. */
async function tenantQuota(base: string, path: string, otherPath = path): Promise<void> {
  assert.equal((await post(`${base}${path}`)).status, 401, 'no verified identity');
  assert.equal(
    (await post(`${base}${path}`, { authorization: 'token-of-acme' })).status,
    401,
    'a token without the Bearer scheme',
  );
  for (let i = 0; i < 10; i++) {
    const res = await post(`${base}${path}?x=${i}`, bearer('token-of-acme'));
    assert.equal(res.status, 201, `request ${i + 1} of 10`);
    if (i === 0) assert.match(res.headers.get('ratelimit-policy') ?? '', /;q=10;w=60$/);
  }
  const limited = await post(`${base}${otherPath}?x=y`, bearer('token-of-acme'));
  assert.equal(limited.status, 429);
  assert.match(limited.headers.get('ratelimit-policy') ?? '', /;q=10;w=60$/);
  assert.match(limited.headers.get('ratelimit') ?? '', /;r=0;t=\d+$/);
  const retryAfter = Number(limited.headers.get('retry-after'));
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `${retryAfter}`);
  assert.equal((await post(`${base}${path}`, bearer('token-of-globex'))).status, 201);
}

/**
 * Health checks and unknown paths neither spend the limited route's quota nor run its
 * handler: a guard wrapped around a whole server would count `GET /healthz` against
 * `POST/login` and answer `GET /favicon.ico` with the route's handler.
 */
async function otherPathsUntouched(base: string, headers: Record<string, string>) {
  for (let i = 0; i < 12; i++) {
    const health = await fetch(`${base}/healthz`, { headers });
    assert.equal(health.status, 200);
    assert.equal(await health.text(), 'ok');
    assert.equal(health.headers.get('ratelimit'), null);
  }
  for (const path of ['/favicon.ico', '/orders/x', '/login/x']) {
    const other = await fetch(`${base}${path}`, { headers });
    await other.arrayBuffer();
    assert.equal(other.status, 404, path);
  }
}

describe('README examples', () => {
  it('every example block in the README is its file in examples/, verbatim, and every file is shown', () => {
    const blocks = readmeExamples();
    const files = readdirSync(new URL('examples/', root)).filter((f) => !NOT_IN_README.has(f));
    assert.deepEqual([...blocks.keys()].sort(), files.map((f) => `examples/${f}`).sort());
    for (const [file, block] of blocks) {
      assert.equal(block, readFileSync(new URL(file, root), 'utf8'), `${file} differs from README`);
    }
  });

  it('examples/use.ts: one take, printed', async () => {
    assert.equal(await printed('use.ts'), 'admitted, 9 left\n');
  });

  it('examples/stacked.ts: stacked limits with takeAll, peek and reset, printed', async () => {
    assert.equal(
      await printed('stacked.ts'),
      [
        'admitted',
        'admitted',
        'limited by orders-burst',
        'peek: true',
        'reset: true',
        'admitted',
        'limited by orders-per-hour',
        '',
      ].join('\n'),
    );
  });

  it('examples/decision-log.ts: one pino line per decision — requestId, outcome, policy, route, latency — and no tenant', async () => {
    const output = await printed('decision-log.ts');
    const lines = output
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      lines.map((l) => [l.msg, l.requestId, l.outcome, l.policy, l.route, l.cached, l.code]),
      [
        ['rate limit decision', 'req-1', 'allowed', 'orders', 'POST/orders', false, undefined],
        ['rate limit decision', 'req-2', 'allowed', 'orders', 'POST/orders', false, undefined],
        ['rate limit decision', 'req-3', 'limited', 'orders', 'POST/orders', true, undefined],
        [
          'rate limiter failed',
          undefined,
          'invalid',
          'orders',
          undefined,
          false,
          'SLUICE_INVALID_INPUT',
        ],
      ],
    );
    for (const line of lines) assert.equal(typeof line.latencyMs, 'number');
    assert.ok((lines[0]?.latencyMs ?? 0) > 0, 'a Redis round trip');
    assert.equal(lines[2]?.latencyMs, 0, 'answered by the denial cache');
    assert.doesNotMatch(output, /acme|tenant/, 'no tenant in the log');
  });

  it('examples/node-http.ts', async () => {
    const { base } = await start('node-http.ts');
    await tenantQuota(base, '/orders');
  });

  it('examples/express.ts: one quota for the route template, whatever the id', async () => {
    const { base } = await start('express.ts');
    await tenantQuota(base, '/orders/1', '/orders/2');
  });

  it('examples/fastify.ts: one quota for the route template, whatever the id', async () => {
    const { base } = await start('fastify.ts');
    await tenantQuota(base, '/orders/1', '/orders/2');
  });

  it('examples/hono.ts', async () => {
    const { base } = await start('hono.ts');
    await tenantQuota(base, '/orders');
  });

  it('examples/plans.ts: a plan per tenant, a per-user and a tenant-wide limit, decided at once', async () => {
    const { base } = await start('plans.ts');
    for (let i = 0; i < 5; i++) assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const report = async (token: string) => {
      const res = await fetch(`${base}/reports`, { method: 'POST', headers: bearer(token) });
      const body = await res.text();
      return { status: res.status, headers: res.headers, body };
    };
    // globex is on the free plan: 2 per minute.
    const bob = [
      await report('token-of-bob'),
      await report('token-of-bob'),
      await report('token-of-bob'),
    ];
    assert.deepEqual(
      bob.map((r) => r.status),
      [201, 201, 429],
    );
    const refused = bob[2] as (typeof bob)[number];
    assert.deepEqual(JSON.parse(refused.body)['violated-policies'], ['free']);
    assert.equal(
      refused.headers.get('ratelimit-policy'),
      '"free";q=2;w=60, "per-user";q=5;w=60, "tenant-api";q=1000;w=60',
    );
    // acme is on pro (100 per minute): the per-user limit of 5 binds first.
    const ann: Awaited<ReturnType<typeof report>>[] = [];
    for (let i = 0; i < 6; i++) ann.push(await report('token-of-ann'));
    assert.deepEqual(
      ann.map((r) => r.status),
      [201, 201, 201, 201, 201, 429],
    );
    assert.match(
      ann[4]?.headers.get('ratelimit') ?? '',
      /^"pro";r=95;t=\d+, "pro-burst";r=(1[5-9]|20);t=\d+, "per-user";r=0;t=\d+, "tenant-api";r=995;t=\d+$/,
    );
    assert.deepEqual(JSON.parse(ann[5]?.body ?? '{}')['violated-policies'], ['per-user']);
    assert.equal((await report('token-of-nobody')).status, 401);
  });

  it('examples/policies-file.ts with examples/policies.json: only POST /orders spends its quota', async () => {
    const { base } = await start('policies-file.ts');
    await otherPathsUntouched(base, bearer('token-of-acme'));
    for (let i = 0; i < 10; i++) {
      assert.equal((await post(`${base}/orders`, bearer('token-of-acme'))).status, 201);
    }
    assert.equal((await post(`${base}/orders`, bearer('token-of-acme'))).status, 429);
  });

  it('examples/plans-file.ts with examples/plans-file.json: the default plan, a plan, a tenant’s own limits, a tenant-wide limit', async () => {
    const { base } = await start('plans-file.ts');
    const order = async (token: string) => {
      const res = await fetch(`${base}/orders`, { method: 'POST', headers: bearer(token) });
      const body = await res.text();
      return {
        status: res.status,
        violated: res.status === 429 ? JSON.parse(body)['violated-policies'] : [],
      };
    };
    const orders = async (token: string, n: number) => {
      const out: Awaited<ReturnType<typeof order>>[] = [];
      for (let i = 0; i < n; i++) out.push(await order(token));
      return out;
    };
    // initech has no plan of its own: the default plan "free" lists no POST/orders, so the
    // route's own limits apply (2 per minute).
    const eve = await orders('token-of-eve', 3);
    assert.deepEqual(
      eve.map((r) => r.status),
      [201, 201, 429],
    );
    assert.deepEqual(eve[2]?.violated, ['orders-free']);
    // acme is on "pro" (100 per minute): its user's limit of 5 on the route binds first.
    const ann = await orders('token-of-ann', 6);
    assert.deepEqual(
      ann.map((r) => r.status),
      [201, 201, 201, 201, 201, 429],
    );
    assert.ok(ann[5]?.violated.includes('per-user'), String(ann[5]?.violated));
    // globex has limits of its own on POST/orders.
    const bob = await orders('token-of-bob', 4);
    assert.deepEqual(
      bob.map((r) => r.status),
      [201, 201, 201, 429],
    );
    assert.deepEqual(bob[3]?.violated, ['globex-orders']);
    // GET /search spends the tenant-wide "api-calls", shared with POST /orders.
    const search = await fetch(`${base}/search`, { headers: bearer('token-of-bob') });
    assert.equal(search.status, 200);
    assert.equal(search.headers.get('ratelimit-policy'), '"api-calls";q=100;w=10');
    assert.match(search.headers.get('ratelimit') ?? '', /^"api-calls";r=(9[6-9]|100);t=\d+$/);
    assert.equal((await order('token-of-nobody')).status, 401);
  });

  it('examples/ip-limit.ts: X-Forwarded-For counts only through trusted proxies', async () => {
    const { base } = await start('ip-limit.ts');
    const from = (address: string) => ({ 'x-forwarded-for': address });
    await otherPathsUntouched(base, from('203.0.113.7'));
    for (let i = 0; i < 5; i++) {
      assert.equal((await post(`${base}/login`, from('203.0.113.7'))).status, 204);
    }
    assert.equal((await post(`${base}/login`, from('203.0.113.7'))).status, 429);
    // A client prepending its own entry changes nothing: the first untrusted hop counts.
    assert.equal((await post(`${base}/login`, from('198.51.100.1, 203.0.113.7'))).status, 429);
    assert.equal((await post(`${base}/login`, from('203.0.113.8'))).status, 204);
  });
});
