/**
 * Every place sluice calls code the application gave it to observe or shape what happens —
 * decision events, metrics sinks, start-up warnings, HTTP outcome hooks, response hooks,
 * connection hooks, `withRateLimit`'s `onError` — guarded: a throw is a process warning
 * (`SLUICE_OBSERVER_ERROR`, throttled per hook), never a changed decision, a changed response
 * or a stopped reconnect. (The reconnect hook and the stall hook have their own tests, in
 * operator-mistakes.test.ts and stall-watchdog.test.ts; a hook's rejected promise, in
 * decision-events.test.ts.)
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixedWindow, MemoryStore, RateLimiter } from 'sluice';
import type { LimiterSource, Metrics } from 'sluice/metrics';
import { withRateLimit } from 'sluice/node';
import { connectRedis } from 'sluice/node-redis';
import type { ScriptStore } from 'sluice/store';
import { TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const warnings: string[] = [];
const onWarning = (warning: Error & { code?: string }) => {
  if (warning.code === 'SLUICE_OBSERVER_ERROR') warnings.push(warning.message);
};
before(() => process.on('warning', onWarning));
after(() => process.off('warning', onWarning));

const boom = (what: string) => () => {
  throw new Error(`${what} bug`);
};
const policy = fixedWindow({ limit: 1, windowMs: 60_000 });

/** A sink whose `method` throws. */
function brokenSink(method: keyof Metrics): Metrics {
  const sink: Metrics = {
    decision() {},
    request() {},
    redisEvent() {},
    attach(_source: LimiterSource) {},
  };
  return { ...sink, [method]: boom(`metrics.${method}`) };
}

async function warned(what: string): Promise<void> {
  await sleep(20);
  assert.ok(
    warnings.some((w) => w.includes(`sluice ${what} failed`) && w.includes('bug')),
    `a warning for ${what}: ${warnings.join(' | ')}`,
  );
}

describe('the limiter', () => {
  for (const [what, options] of [
    ['onDecision', { onDecision: boom('onDecision') }],
    ['metrics.decision', { metrics: brokenSink('decision') }],
    ['metrics.attach', { metrics: brokenSink('attach') }],
  ] as const) {
    it(`${what} throws: decisions unchanged`, async () => {
      const limiter = new RateLimiter({ store: new MemoryStore(), ...options });
      assert.equal((await limiter.take({ tenant: 't' }, policy)).allowed, true);
      assert.equal((await limiter.take({ tenant: 't' }, policy)).allowed, false);
      await warned(what);
    });
  }

  it('onWarning throws: the start-up check still ran, decisions unchanged', async () => {
    const memory = new MemoryStore();
    const store: ScriptStore = {
      evalScript: (script, keys, args) => memory.evalScript(script, keys, args),
      serverFacts: () =>
        Promise.resolve({ version: '7.0.0', role: 'master', maxmemoryPolicy: 'allkeys-lru' }),
    };
    const limiter = new RateLimiter({ store, onWarning: boom('onWarning') });
    assert.equal((await limiter.take({ tenant: 't' }, policy)).allowed, true);
    await warned('onWarning');
  });
});

describe('HTTP', () => {
  let server: Server | undefined;
  after(() => server?.close());

  async function serve(options: Record<string, unknown>): Promise<string> {
    const limiter = new RateLimiter({ store: new MemoryStore() });
    const listener = withRateLimit(
      {
        limiter,
        policy,
        route: 'GET/',
        identify: (req: { headers: Record<string, unknown> }) =>
          req.headers.authorization === 'none' ? undefined : 't',
        ...options,
      } as never,
      (_req, res) => {
        if (_req.headers['x-fail'] === '1') throw new Error('handler failed');
        res.end('ok');
      },
    );
    server?.close();
    server = createServer(listener);
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/`;
  }

  for (const [what, options] of [
    ['onOutcome', { onOutcome: boom('onOutcome') }],
    ['metrics.request', { metrics: brokenSink('request') }],
    ['responses.limited', { responses: { limited: boom('responses.limited') } }],
  ] as const) {
    it(`${what} throws: the same statuses (200, then 429 with Retry-After)`, async () => {
      const url = await serve(options);
      const first = await fetch(url);
      assert.equal(first.status, 200);
      const second = await fetch(url);
      assert.equal(second.status, 429);
      assert.ok(Number(second.headers.get('retry-after')) >= 1);
      await warned(what);
    });
  }

  it('responses.unidentified throws: the guard’s own 401', async () => {
    const url = await serve({ responses: { unidentified: boom('responses.unidentified') } });
    assert.equal((await fetch(url, { headers: { authorization: 'none' } })).status, 401);
    await warned('responses.unidentified');
  });

  it('withRateLimit onError throws: the 500 is sent all the same', async () => {
    const url = await serve({ onError: boom('withRateLimit onError') });
    assert.equal((await fetch(url, { headers: { 'x-fail': '1' } })).status, 500);
    await warned('withRateLimit onError');
  });
});

describe('a connection', () => {
  for (const [what, options] of [
    ['onError', { onError: boom('onError') }],
    ['metrics.redisEvent', { metrics: brokenSink('redisEvent'), onError: () => {} }],
  ] as const) {
    it(`${what} throws on a lost connection: it reconnects, decisions resume`, async () => {
      const connection = await connectRedis({ url: redis.server.url, ...options });
      try {
        const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: connection });
        assert.equal((await limiter.take({ tenant: `${what}-a` }, policy)).allowed, true);
        const admin = await redis.admin();
        await admin.client.sendCommand(['CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes']);
        let allowed = false;
        for (let i = 0; i < 200 && !allowed; i++) {
          allowed = await limiter.take({ tenant: `${what}-${i}` }, policy).then(
            (d) => d.allowed,
            () => false,
          );
          if (!allowed) await sleep(25);
        }
        assert.ok(allowed, 'decisions resumed');
        await warned(what);
      } finally {
        connection.destroy();
      }
    });
  }
});
