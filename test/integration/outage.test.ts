/**
 * Bounded under outage (S12–S14): 1,000 takes per second offered to a limiter whose Redis
 * is black-holed, then one whose Redis is down. No caller waits past its deadline, in-flight
 * never exceeds the cap, the heap stays flat, and nothing is left unhandled. The figures are
 * printed. `SLUICE_OUTAGE_SECONDS` shortens the black-hole run (default 30).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { fixedWindow, isSluiceError, RateLimiter } from 'sluice';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { startTcpProxy } from '../../src/demo/tcp-proxy.js';
import { watchLoop } from '../helpers/lag.js';
import { useRedis } from '../helpers/redis.js';
import { boundFor, within } from '../helpers/within.js';

const redis = useRedis();
// A full garbage collection before each heap reading, so that growth means retained memory.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const SECONDS = Number(process.env.SLUICE_OUTAGE_SECONDS ?? 30);
/** The deadline of every limiter here. */
const TIMEOUT_MS = 150;
const own: PrivateRedis[] = [];
after(async () => {
  for (const server of own) await server.stop();
});

interface Figures {
  offered: number;
  outcomes: Record<string, number>;
  maxWaitMs: number;
  maxInFlight: number;
  heapGrowthMb: number;
  unhandled: number;
  /** The worst lateness of this process's event loop while the calls ran (helpers/lag.ts). */
  lagMs: number;
}

/** Offers `perSecond` takes per second for `seconds`, then waits for every call to settle. */
async function offer(limiter: RateLimiter, seconds: number, perSecond = 1000): Promise<Figures> {
  const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
  let unhandled = 0;
  const onUnhandled = () => {
    unhandled++;
  };
  process.on('unhandledRejection', onUnhandled);
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const outcomes: Record<string, number> = {};
  let maxWaitMs = 0;
  let maxInFlight = 0;
  const calls: Promise<void>[] = [];
  const lag = watchLoop();
  const started = performance.now();
  let offered = 0;
  try {
    while (performance.now() - started < seconds * 1000) {
      // 1,000 per second, in ticks of 10 every 10 ms.
      for (let i = 0; i < perSecond / 100; i++) {
        const t0 = performance.now();
        offered++;
        calls.push(
          limiter.take({ tenant: `t${offered % 50}`, route: 'r' }, policy).then(
            (d) => {
              outcomes[d.allowed ? 'allowed' : 'limited'] =
                (outcomes[d.allowed ? 'allowed' : 'limited'] ?? 0) + 1;
              maxWaitMs = Math.max(maxWaitMs, performance.now() - t0);
            },
            (error: unknown) => {
              const code = isSluiceError(error) ? error.code : 'UNTYPED';
              outcomes[code] = (outcomes[code] ?? 0) + 1;
              maxWaitMs = Math.max(maxWaitMs, performance.now() - t0);
            },
          ),
        );
      }
      maxInFlight = Math.max(maxInFlight, limiter.stats().inFlight);
      await sleep(10);
    }
    await within(Promise.all(calls), boundFor(TIMEOUT_MS), 'every call offered settles');
    const lagMs = lag.stop();
    calls.length = 0;
    await sleep(50);
    gc();
    const heapGrowthMb = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
    return { offered, outcomes, maxWaitMs, maxInFlight, heapGrowthMb, unhandled, lagMs };
  } finally {
    lag.stop();
    process.off('unhandledRejection', onUnhandled);
  }
}

function print(label: string, f: Figures): void {
  console.log(
    `${label}: offered ${f.offered}, outcomes ${JSON.stringify(f.outcomes)}, longest wait ${f.maxWaitMs.toFixed(0)} ms, ` +
      `max in flight ${f.maxInFlight}, heap growth ${f.heapGrowthMb.toFixed(1)} MB, unhandled ${f.unhandled}, ` +
      `event loop late by up to ${f.lagMs.toFixed(0)} ms`,
  );
}

describe('bounded under outage', () => {
  it(`Redis black-holed for ${SECONDS} s: every call settles within its deadline, in-flight ≤ cap, heap flat`, async () => {
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    try {
      const client = await redis.client({
        url: `redis://127.0.0.1:${proxy.port}`,
        reconnect: true,
      });
      const limiter = new RateLimiter({ client, timeoutMs: TIMEOUT_MS, maxInFlight: 500 });
      proxy.mode = 'blackhole';
      const f = await offer(limiter, SECONDS);
      print('black hole', f);
      assert.equal(f.unhandled, 0);
      assert.equal(f.outcomes.UNTYPED, undefined);
      assert.equal(f.outcomes.allowed, undefined, 'nothing is allowed while Redis is unreachable');
      assert.ok(
        f.maxWaitMs < 150 + 250 + f.lagMs,
        `longest wait ${f.maxWaitMs.toFixed(0)} ms (deadline 150 ms)`,
      );
      assert.ok(f.maxInFlight <= 500, `max in flight ${f.maxInFlight}`);
      assert.ok((f.outcomes.SLUICE_TIMEOUT ?? 0) > 0);
      // A Redis that stopped answering is never reported as the process over its own cap.
      assert.equal(f.outcomes.SLUICE_OVERLOAD, undefined, 'no OverloadError');
      if (SECONDS >= 4) {
        // The stall watchdog (stallTimeoutMs 2000) recycled the connection: calls failed fast.
        assert.ok((f.outcomes.SLUICE_UNAVAILABLE ?? 0) > 0, 'the watchdog recycled the connection');
      }
      assert.ok(f.heapGrowthMb < 20, `heap growth ${f.heapGrowthMb.toFixed(1)} MB`);
    } finally {
      await proxy.close();
    }
  });

  it('Redis down for 10 s: every call fails at once with UnavailableError; serving again once Redis is back', async () => {
    const server = await startRedisServer();
    own.push(server);
    const client = await redis.client({ url: server.url, reconnect: true });
    const limiter = new RateLimiter({ client, timeoutMs: TIMEOUT_MS, maxInFlight: 500 });
    await server.kill();
    const f = await offer(limiter, 10);
    print('Redis down', f);
    assert.equal(f.unhandled, 0);
    assert.deepEqual(Object.keys(f.outcomes), ['SLUICE_UNAVAILABLE']);
    assert.ok(
      f.maxWaitMs < 100 + f.lagMs,
      `longest wait ${f.maxWaitMs.toFixed(0)} ms (loop late ≤ ${f.lagMs.toFixed(0)} ms)`,
    );
    assert.ok(f.heapGrowthMb < 20);
    await server.restart();
    const deadline = Date.now() + 5000;
    while (!client.isReady && Date.now() < deadline) await sleep(20);
    const d = await limiter.take(
      { tenant: 'back', route: 'r' },
      fixedWindow({ limit: 1, windowMs: 1000 }),
    );
    assert.equal(d.allowed, true, 'the limiter serves again without a restart');
  });
});
