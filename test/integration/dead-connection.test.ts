/**
 * A connection that answers nothing (a black hole between the process and Redis), for every
 * kind of client: no call holds an in-flight slot longer than `stallTimeoutMs`, callers get
 * `TimeoutError` or `UnavailableError` — never `OverloadError`, which means the process is
 * over its own cap — calls fail at once while the node is stalled instead of piling up in
 * the client, and decisions resume once the path heals.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { fixedWindow, isSluiceError, RateLimiter, type RateLimiterOptions } from 'sluice';
import { IOREDIS_OPTIONS } from 'sluice/ioredis';
import { connectRedis } from 'sluice/node-redis';
import { startTcpProxy, type TcpProxy } from '../../src/demo/tcp-proxy.js';
import { randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const proxies: TcpProxy[] = [];
const closers: (() => unknown)[] = [];
after(async () => {
  for (const close of closers) await Promise.resolve(close()).catch(() => {});
  for (const proxy of proxies) await proxy.close();
});

const policy = fixedWindow({ limit: 1_000_000, windowMs: 60_000 });
const TIMEOUT_MS = 100;
const STALL_MS = 600;
const MAX_IN_FLIGHT = 40;
const WAVE = 10;

type Kind = 'node-redis client of your own' | 'ioredis' | 'connectRedis';

/** A client of `kind` through a fresh proxy to the private Redis. */
async function clientThrough(kind: Kind): Promise<{ proxy: TcpProxy; client: unknown }> {
  const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
  proxies.push(proxy);
  const url = `redis://127.0.0.1:${proxy.port}`;
  if (kind === 'ioredis') {
    const client = new Redis({ host: '127.0.0.1', port: proxy.port, ...IOREDIS_OPTIONS });
    client.on('error', () => {});
    closers.push(() => client.disconnect());
    await new Promise((resolve) => client.once('ready', resolve));
    return { proxy, client };
  }
  if (kind === 'connectRedis') {
    // The watchdog off: the limiter's own stall handling is under test.
    const client = await connectRedis({ url, stallTimeoutMs: 0, onError: () => {} });
    closers.push(() => client.destroy());
    return { proxy, client };
  }
  const client = createClient({ url, disableOfflineQueue: true });
  client.on('error', () => {});
  closers.push(() => client.destroy());
  await client.connect();
  return { proxy, client };
}

/** The outcome of one take: `allowed`/`limited`, or the error's code. */
async function outcome(limiter: RateLimiter): Promise<{ outcome: string; ms: number }> {
  const started = performance.now();
  const result = await limiter.take({ tenant: randomTenant() }, policy).then(
    (d) => (d.allowed ? 'allowed' : 'limited'),
    (error: unknown) => (isSluiceError(error) ? error.code : `untyped: ${String(error)}`),
  );
  return { outcome: result, ms: performance.now() - started };
}

/** Takes until one is allowed, for up to `withinMs`: the ms that took, or undefined. */
async function untilAllowed(limiter: RateLimiter, withinMs: number): Promise<number | undefined> {
  const started = performance.now();
  while (performance.now() - started < withinMs) {
    if ((await outcome(limiter)).outcome === 'allowed') return performance.now() - started;
    await sleep(20);
  }
  return undefined;
}

for (const kind of ['node-redis client of your own', 'ioredis', 'connectRedis'] as const) {
  describe(`a connection that answers nothing: ${kind}`, () => {
    it('never OverloadError, no slot held past stallTimeoutMs, calls fail at once while stalled, resume once healed', async () => {
      const { proxy, client } = await clientThrough(kind);
      const limiter = new RateLimiter({
        client: client as RateLimiterOptions['client'],
        timeoutMs: TIMEOUT_MS,
        maxInFlight: MAX_IN_FLIGHT,
        stallTimeoutMs: STALL_MS,
        denialCache: false,
      });
      // The first calls also open sluice's script connection (beside a client of your own):
      // on a loaded machine that can take longer than one 100-ms deadline.
      assert.ok((await untilAllowed(limiter, 10_000)) !== undefined, 'decisions before the stall');
      proxy.mode = 'blackhole';
      const started = performance.now();
      const seen: { outcome: string; ms: number; at: number }[] = [];
      let maxInFlight = 0;
      // Many more calls than the cap, over three stall timeouts. A wave of 10 every 50 ms fills
      // the cap at the fifth wave (~200 ms), well after the first calls' deadline (100 ms): a
      // cap full of calls younger than their deadline is an honest OverloadError (a timer that
      // fires a little early made waves of 15 fill it at 99.6 ms in one CI run).
      while (performance.now() - started < 3 * STALL_MS) {
        const wave = Array.from({ length: WAVE }, () =>
          outcome(limiter).then((o) => seen.push({ ...o, at: performance.now() - started })),
        );
        maxInFlight = Math.max(maxInFlight, limiter.stats().inFlight);
        await Promise.race([Promise.all(wave), sleep(50)]);
      }
      await sleep(TIMEOUT_MS * 2);
      const codes = new Set(seen.map((o) => o.outcome));
      assert.ok(!codes.has('SLUICE_OVERLOAD'), `no OverloadError: ${[...codes].join(', ')}`);
      for (const code of codes) {
        assert.ok(['SLUICE_TIMEOUT', 'SLUICE_UNAVAILABLE'].includes(code), `outcome ${code}`);
      }
      assert.ok(maxInFlight <= MAX_IN_FLIGHT, `in flight ${maxInFlight}`);
      // Once stalled (after stallTimeoutMs), calls fail at once instead of waiting.
      const late = seen.filter((o) => o.at > 1.5 * STALL_MS);
      assert.ok(late.length > 50, `${late.length} late calls`);
      const fast = late.filter((o) => o.outcome === 'SLUICE_UNAVAILABLE' && o.ms < TIMEOUT_MS / 2);
      // All but the probes, one at a time (each waits out its deadline).
      assert.ok(
        fast.length >= 0.95 * late.length,
        `${fast.length} of ${late.length} failed at once`,
      );
      // No slot is held by the calls given up on: at most the probe's.
      await sleep(STALL_MS);
      await outcome(limiter); // a call after the stall timeout reaps what is overdue
      assert.ok(limiter.stats().inFlight <= 2, `still in flight: ${limiter.stats().inFlight}`);
      // The path heals: decisions resume.
      proxy.mode = 'pass';
      const resumed = await untilAllowed(limiter, 10_000);
      console.log(
        JSON.stringify({ blackHoleHealed: kind, resumedAfterMs: Math.round(resumed ?? -1) }),
      );
      assert.ok(resumed !== undefined, 'decisions resumed within 10 s of the path healing');
      assert.equal((await outcome(limiter)).outcome, 'allowed');
    });
  });
}

describe('a connection frozen for good while new connections work (a load balancer that lost its state)', () => {
  for (const kind of ['ioredis', 'connectRedis', 'node-redis client of your own'] as const) {
    const replaced = kind !== 'node-redis client of your own';
    it(`${kind}: ${replaced ? 'the connection is replaced and decisions resume' : 'calls fail at once (node-redis keeps the connection), never OverloadError'}`, async () => {
      const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
      proxies.push(proxy);
      const url = `redis://127.0.0.1:${proxy.port}`;
      let client: unknown;
      if (kind === 'ioredis') {
        const c = new Redis({
          host: '127.0.0.1',
          port: proxy.port,
          ...IOREDIS_OPTIONS,
          socketTimeout: 500,
        });
        c.on('error', () => {});
        closers.push(() => c.disconnect());
        await new Promise((resolve) => c.once('ready', resolve));
        client = c;
      } else if (kind === 'connectRedis') {
        const c = await connectRedis({ url, stallTimeoutMs: 500, onError: () => {} });
        closers.push(() => c.destroy());
        client = c;
      } else {
        const c = createClient({ url, disableOfflineQueue: true });
        c.on('error', () => {});
        closers.push(() => c.destroy());
        await c.connect();
        client = c;
      }
      const limiter = new RateLimiter({
        client: client as RateLimiterOptions['client'],
        timeoutMs: TIMEOUT_MS,
        maxInFlight: MAX_IN_FLIGHT,
        stallTimeoutMs: STALL_MS,
        denialCache: false,
      });
      assert.ok((await untilAllowed(limiter, 10_000)) !== undefined, 'decisions before the freeze');
      proxy.freezeConnections();
      const frozenAt = performance.now();
      const seen: string[] = [];
      let resumedAfterMs: number | undefined;
      while (performance.now() - frozenAt < (replaced ? 10_000 : 3 * STALL_MS)) {
        const o = await Promise.race([outcome(limiter), sleep(50).then(() => undefined)]);
        if (o === undefined) continue;
        seen.push(o.outcome);
        if (o.outcome === 'allowed') {
          resumedAfterMs = Math.round(performance.now() - frozenAt);
          break;
        }
        await sleep(20);
      }
      console.log(
        JSON.stringify({ frozenConnection: kind, resumedAfterMs, outcomes: [...new Set(seen)] }),
      );
      assert.ok(!seen.includes('SLUICE_OVERLOAD'), 'never OverloadError');
      if (replaced)
        assert.ok(resumedAfterMs !== undefined, 'decisions resumed on a new connection');
      else assert.ok(seen.includes('SLUICE_UNAVAILABLE'), 'it fails at once once stalled');
    });
  }
});
