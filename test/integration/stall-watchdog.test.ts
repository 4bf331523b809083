/**
 * The stall watchdog of `connectRedis` (`stallTimeoutMs`): a connection whose traffic is
 * black-holed keeps every written command pending — and so every `maxInFlight` slot held —
 * until the kernel gives up on it. The watchdog recycles it so the slots free at once and
 * calls fail fast, and reconnects once the path is back.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  fixedWindow,
  InvalidInputError,
  isSluiceError,
  RateLimiter,
  type UnavailableError,
} from 'sluice';
import { connectRedis } from 'sluice/node-redis';
import { startTcpProxy, type TcpProxy } from '../../src/demo/tcp-proxy.js';
import { watchLoop } from '../helpers/lag.js';
import { type Client, randomTenant, useRedis } from '../helpers/redis.js';
import { boundFor, within } from '../helpers/within.js';

const redis = useRedis();
const proxies: TcpProxy[] = [];
after(async () => {
  for (const proxy of proxies) await proxy.close();
});
const policy = fixedWindow({ limit: 1000, windowMs: 60_000 });

/**
 * A client through a proxy of its own, its stalls collected in `stalls`; `onStall`, if given,
 * also runs on each (with the client).
 */
async function proxied(options: {
  stallTimeoutMs: number;
  reconnect: boolean;
  onStall?: (client: Client) => void;
}) {
  const { onStall, ...rest } = options;
  const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
  proxies.push(proxy);
  const stalls: UnavailableError[] = [];
  const client: Client = await redis.client({
    url: `redis://127.0.0.1:${proxy.port}`,
    ...rest,
    onStall: (error) => {
      stalls.push(error);
      onStall?.(client);
    },
  });
  return { proxy, client, stalls };
}

/**
 * The outcome of a take: `allowed`, `limited` or the error code; how long it took, the worst
 * lateness of this process's event loop meanwhile (see helpers/lag.ts), and when `take()`
 * returned (`performance.now()`: the in-flight cap was checked before). Fails the test if the
 * take has not settled within `boundFor(timeoutMs)` (the limiter's deadline, default 150 ms).
 */
async function outcomeOf(
  limiter: RateLimiter,
  timeoutMs = 150,
): Promise<{ outcome: string; ms: number; lagMs: number; calledAt: number }> {
  const lag = watchLoop();
  const started = performance.now();
  const taken = limiter.take({ tenant: randomTenant(), route: 'r' }, policy);
  const calledAt = performance.now();
  const outcome = await within(
    taken.then(
      (d) => (d.allowed ? 'allowed' : 'limited'),
      (error: unknown) => (isSluiceError(error) ? error.code : `untyped: ${String(error)}`),
    ),
    boundFor(timeoutMs),
    `a take (deadline ${timeoutMs} ms)`,
  );
  const ms = performance.now() - started;
  return { outcome, ms, lagMs: lag.stop(), calledAt };
}

async function until(condition: () => boolean, withinMs: number, what: string): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`not within ${withinMs} ms: ${what}`);
    await sleep(10);
  }
}

/**
 * Fills the in-flight cap on a black-holed connection (deadline 100 ms); returns the outcomes'
 * counts. The takes are made in one go: those over the cap are refused as an overload, unless
 * the cap's oldest call had waited past its deadline by then — Redis stopped answering, not an
 * overload — which happens when this process is held (a loaded machine) between the first
 * take and one over the cap. The oldest call was sent after `first`, and the cap checked
 * before `take()` returned: a take refused as unavailable is counted as the overload it was
 * made as when it returned more than the deadline after `first`; any other is counted.
 */
async function fillCap(limiter: RateLimiter, takes: number): Promise<Record<string, number>> {
  const first = performance.now();
  const outcomes = await Promise.all(Array.from({ length: takes }, () => outcomeOf(limiter, 100)));
  const late = outcomes.filter((o) => o.outcome === 'SLUICE_UNAVAILABLE');
  if (late.length > 0) {
    const at = late.map((o) => (o.calledAt - first).toFixed(0)).join(', ');
    console.log(`refused as unavailable: takes returned ${at} ms after the first was made`);
  }
  const counts: Record<string, number> = {};
  for (const { outcome, calledAt } of outcomes) {
    const held = outcome === 'SLUICE_UNAVAILABLE' && calledAt - first > 100;
    const counted = held ? 'SLUICE_OVERLOAD' : outcome;
    counts[counted] = (counts[counted] ?? 0) + 1;
  }
  return counts;
}

describe('stall watchdog', () => {
  it('without it, the written commands stay pending; the limiter reports the dead connection as unavailable, and frees the slots after its own stallTimeoutMs', async () => {
    const { proxy, client } = await proxied({ stallTimeoutMs: 0, reconnect: true });
    const limiter = new RateLimiter({
      client,
      timeoutMs: 100,
      maxInFlight: 20,
      maxBatchSize: 1,
      stallTimeoutMs: 2000,
    });
    proxy.mode = 'blackhole';
    const counts = await fillCap(limiter, 30);
    // 30 at once over a cap of 20: the process really had 30 in flight.
    assert.deepEqual(counts, { SLUICE_TIMEOUT: 20, SLUICE_OVERLOAD: 10 });
    await sleep(1000);
    assert.equal(limiter.stats().inFlight, 20, 'the written commands are still pending');
    // Past their deadline, they wait on a Redis that stopped answering: not an overload.
    assert.equal((await outcomeOf(limiter)).outcome, 'SLUICE_UNAVAILABLE');
    await sleep(1100);
    // Given up on after stallTimeoutMs: the slots free; one call goes as the stalled node's
    // probe (it times out), the next fails at once.
    assert.equal((await outcomeOf(limiter)).outcome, 'SLUICE_TIMEOUT');
    assert.equal(limiter.stats().inFlight, 1, 'only the probe is in flight');
    const next = await outcomeOf(limiter);
    assert.equal(next.outcome, 'SLUICE_UNAVAILABLE');
    assert.ok(
      next.ms < 50 + next.lagMs,
      `answered in ${next.ms.toFixed(0)} ms (loop late ≤ ${next.lagMs.toFixed(0)} ms)`,
    );
    client.destroy();
  });

  it('recycles a black-holed connection: slots free, calls fail at once, service resumes when the path is back', async () => {
    const { proxy, client, stalls } = await proxied({ stallTimeoutMs: 300, reconnect: true });
    const limiter = new RateLimiter({ client, timeoutMs: 100, maxInFlight: 20, maxBatchSize: 1 });
    assert.equal((await outcomeOf(limiter)).outcome, 'allowed');
    proxy.mode = 'blackhole';
    const counts = await fillCap(limiter, 30);
    assert.deepEqual(counts, { SLUICE_TIMEOUT: 20, SLUICE_OVERLOAD: 10 });
    const blackHoledAt = performance.now();
    await until(() => stalls.length >= 1, 2000, 'the stall is detected');
    console.log(
      `stall detected ${(performance.now() - blackHoledAt).toFixed(0)} ms after the cap filled: ${stalls[0]?.message}`,
    );
    assert.match(stalls[0]?.message ?? '', /^Redis connection stalled: no reply to PING/);
    await until(() => limiter.stats().inFlight === 0, 500, 'every slot is freed');
    const failFast = await outcomeOf(limiter);
    assert.equal(failFast.outcome, 'SLUICE_UNAVAILABLE');
    assert.ok(
      failFast.ms < 100 + failFast.lagMs,
      `answered in ${failFast.ms.toFixed(0)} ms (loop late ≤ ${failFast.lagMs.toFixed(0)} ms)`,
    );
    // The new connection's handshake is black-holed too: it is recycled again, and again.
    await until(() => stalls.length >= 3, 3000, 'hung handshakes are recycled');
    assert.match(stalls[1]?.message ?? '', /handshake/);
    proxy.mode = 'pass';
    await until(() => client.isReady, 3000, 'a healthy connection once the path is back');
    assert.equal((await outcomeOf(limiter)).outcome, 'allowed');
    assert.equal(limiter.stats().inFlight, 0);
  });

  it('finds an idle connection black-holed before any caller waits on it', async () => {
    const { proxy, client, stalls } = await proxied({ stallTimeoutMs: 200, reconnect: true });
    const limiter = new RateLimiter({ client, timeoutMs: 100 });
    proxy.mode = 'blackhole';
    await until(() => stalls.length >= 1, 1500, 'the stall is detected without traffic');
    const first = await outcomeOf(limiter);
    assert.equal(first.outcome, 'SLUICE_UNAVAILABLE');
    assert.ok(
      first.ms < 100 + first.lagMs,
      `answered in ${first.ms.toFixed(0)} ms (loop late ≤ ${first.lagMs.toFixed(0)} ms)`,
    );
    client.destroy();
  });

  it('with reconnect off, closes the stalled client for good and fails fast', async () => {
    const { proxy, client, stalls } = await proxied({ stallTimeoutMs: 200, reconnect: false });
    const limiter = new RateLimiter({ client, timeoutMs: 100 });
    proxy.mode = 'blackhole';
    await until(() => stalls.length >= 1, 1500, 'the stall is detected');
    assert.match(stalls[0]?.message ?? '', /reconnect is off/);
    assert.equal(client.isOpen, false);
    proxy.mode = 'pass';
    await sleep(600);
    assert.equal(stalls.length, 1, 'the watchdog stopped with the client');
    assert.equal(client.isOpen, false, 'never reopened');
    assert.equal((await outcomeOf(limiter)).outcome, 'SLUICE_UNAVAILABLE');
  });

  it('stops when the application closes the client, and never reopens it', async () => {
    const { client, stalls } = await proxied({ stallTimeoutMs: 100, reconnect: true });
    await sleep(250); // a few probes answered
    await client.close();
    await sleep(400);
    assert.equal(client.isOpen, false);
    assert.equal(stalls.length, 0);
  });

  it('a client the application closes while the watchdog is reopening it stays closed', async () => {
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    proxies.push(proxy);
    let stalls = 0;
    const client = await redis.client({
      url: `redis://127.0.0.1:${proxy.port}`,
      reconnect: true,
      stallTimeoutMs: 150,
      onStall: () => {
        stalls++;
        // Runs after the watchdog destroyed the connection and before it reopens it.
        queueMicrotask(() => client.destroy());
      },
    });
    proxy.mode = 'blackhole';
    await until(() => stalls === 1, 1500, 'the stall is detected');
    proxy.mode = 'pass';
    await sleep(500);
    assert.equal(client.isOpen, false, 'not reopened after the application closed it');
    assert.equal(stalls, 1);
  });

  it('isOpen stays true while the watchdog recycles: an owner that destroys only an open connection still stops it', async () => {
    const openAtStall: boolean[] = [];
    const { proxy, client } = await proxied({
      reconnect: true,
      stallTimeoutMs: 150,
      onStall: (owner) => {
        // After the watchdog destroyed the connection, before it reopens it: a shutdown's
        // `if (isOpen) destroy()` (the test fixture's, the CLI's) found it closed and left the
        // watchdog reconnecting for ever, which kept the process alive.
        openAtStall.push(owner.isOpen);
        if (owner.isOpen) owner.destroy();
      },
    });
    proxy.mode = 'blackhole';
    await until(() => openAtStall.length === 1, 1500, 'the stall is detected');
    proxy.mode = 'pass';
    await sleep(500);
    assert.deepEqual(openAtStall, [true], 'reconnecting, not closed');
    assert.equal(client.isOpen, false, 'destroyed, and not reopened');
    assert.equal(proxy.connections, 0, 'no connection left open through the proxy');
  });

  it('close() while the watchdog is reopening resolves and leaves no connection open', async () => {
    const { proxy, client, stalls } = await proxied({ stallTimeoutMs: 150, reconnect: true });
    proxy.mode = 'blackhole';
    await until(() => stalls.length === 1, 1500, 'the stall is detected');
    proxy.mode = 'pass';
    // It used to reject with "The client is closed".
    await within(client.close(), boundFor(150), 'close() while the watchdog reopens');
    await sleep(400);
    assert.equal(client.isOpen, false);
    assert.equal(proxy.connections, 0, 'no connection left open through the proxy');
  });

  for (const healed of [true, false]) {
    it(`close() from inside the reconnect leaves no connection open (${healed ? 'the path heals' : 'still black-holed'})`, async () => {
      const { proxy, client, stalls } = await proxied({ stallTimeoutMs: 150, reconnect: true });
      // The owner closes the connection at the very moment the watchdog reconnects it.
      const connect = client.client.connect.bind(client.client);
      let closing: Promise<void> | undefined;
      Object.assign(client.client, {
        connect: () => {
          const opening = connect();
          closing = client.close();
          return opening;
        },
      });
      proxy.mode = 'blackhole';
      await until(() => closing !== undefined, 1500, 'the watchdog reconnects');
      if (healed) proxy.mode = 'pass';
      await within(closing as Promise<void>, boundFor(150), 'close() from inside the reconnect');
      await sleep(400);
      assert.equal(stalls.length, 1);
      assert.equal(client.isOpen, false);
      assert.equal(proxy.connections, 0, 'no connection left open through the proxy');
    });
  }

  it('a blocked event loop is not a stalled connection', async () => {
    const stalls: UnavailableError[] = [];
    const client = await redis.client({
      reconnect: true,
      stallTimeoutMs: 300,
      onStall: (error) => {
        stalls.push(error);
      },
    });
    const limiter = new RateLimiter({ client, timeoutMs: 5000 });
    const outcomes: string[] = [];
    for (let i = 0; i < 6; i++) {
      const take = outcomeOf(limiter, 5000);
      await new Promise((resolve) => setImmediate(resolve));
      const end = performance.now() + 400; // longer than stallTimeoutMs
      while (performance.now() < end) {}
      await new Promise((resolve) => setImmediate(resolve));
      outcomes.push((await take).outcome);
    }
    assert.deepEqual(outcomes, Array(6).fill('allowed'));
    assert.equal(stalls.length, 0, 'the replies were waiting unread, not missing');
    client.destroy();
  });

  it('a black hole is still found while the event loop is busy 80 % of the time', async () => {
    const { proxy, client, stalls } = await proxied({ stallTimeoutMs: 300, reconnect: true });
    proxy.mode = 'blackhole';
    const started = performance.now();
    while (stalls.length === 0 && performance.now() - started < 10_000) {
      const end = performance.now() + 240;
      while (performance.now() < end) {}
      await sleep(60);
    }
    assert.equal(stalls.length >= 1, true, 'the stall was found');
    client.destroy();
  });

  it('close() during a black hole settles (within stallTimeoutMs) and leaves no socket', async () => {
    const { proxy, client, stalls } = await proxied({ stallTimeoutMs: 300, reconnect: true });
    proxy.mode = 'blackhole';
    await sleep(200); // the watchdog's PING is outstanding, no verdict yet
    // node-redis alone waits for that PING's reply forever.
    await within(client.close(), boundFor(300), 'close() during a black hole');
    await sleep(100);
    assert.equal(stalls.length, 0);
    assert.equal(client.isOpen, false);
    assert.equal(proxy.connections, 0, 'no connection left open through the proxy');
  });

  it('close() resolves for a client the watchdog closed (reconnect off) and from inside onStall', async () => {
    const off = await proxied({ stallTimeoutMs: 150, reconnect: false });
    off.proxy.mode = 'blackhole';
    await until(() => off.stalls.length === 1, 1500, 'the stall is detected');
    // It used to reject: "The client is closed".
    await within(off.client.close(), boundFor(150), 'close() of a client the watchdog closed');
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    proxies.push(proxy);
    let closing: Promise<void> | undefined;
    const client = await redis.client({
      url: `redis://127.0.0.1:${proxy.port}`,
      reconnect: true,
      stallTimeoutMs: 150,
      onStall: () => {
        closing ??= client.close();
      },
    });
    proxy.mode = 'blackhole';
    await until(() => closing !== undefined, 1500, 'the stall is detected');
    await within(closing as Promise<void>, boundFor(150), 'close() from inside onStall');
    proxy.mode = 'pass';
    await sleep(400);
    assert.equal(client.isOpen, false, 'not reopened');
    assert.equal(proxy.connections, 0);
  });

  it('a throwing onStall listener neither crashes the process nor stops the recycle', async () => {
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    proxies.push(proxy);
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    let calls = 0;
    try {
      const client = await redis.client({
        url: `redis://127.0.0.1:${proxy.port}`,
        reconnect: true,
        stallTimeoutMs: 150,
        onStall: () => {
          calls++;
          throw new Error('listener bug');
        },
      });
      proxy.mode = 'blackhole';
      await until(() => calls >= 1, 1500, 'the stall is detected');
      proxy.mode = 'pass';
      await until(() => client.isReady, 3000, 'the connection was recycled and reopened');
      await sleep(10);
      assert.ok(
        warnings.some((w) => w.includes('listener bug')),
        'the throw is reported',
      );
      client.destroy();
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a healthy connection under load is never recycled', async () => {
    // 500 ms: at 100 ms a CI run on a busy 2-core machine had Redis (sharing the cores with
    // the whole suite) leave the PING behind 200 takes unanswered that long once — slow, not
    // stalled. What is under test is that load alone never reads as a stall.
    const { client, stalls } = await proxied({ stallTimeoutMs: 500, reconnect: true });
    // A generous deadline: a recycle fails the calls in flight at once (SLUICE_UNAVAILABLE),
    // whatever the deadline; a slow reply on a loaded machine is no stall.
    const limiter = new RateLimiter({ client, timeoutMs: 2000 });
    const counts: Record<string, number> = {};
    let takes = 0;
    const started = performance.now();
    while (performance.now() - started < 1000) {
      const outcomes = await Promise.all(
        Array.from({ length: 200 }, () => outcomeOf(limiter, 2000)),
      );
      takes += outcomes.length;
      for (const { outcome } of outcomes) counts[outcome] = (counts[outcome] ?? 0) + 1;
    }
    assert.equal(stalls.length, 0);
    // Every take a decision (each on a fresh scope, far below the limit: admitted).
    assert.deepEqual(counts, { allowed: takes });
    const stats = limiter.stats();
    assert.deepEqual(
      [stats.allowed, stats.limited, stats.timeout, stats.unavailable, stats.inFlight],
      [takes, 0, 0, 0, 0],
    );
    client.destroy();
  });

  it('refuses a bad stallTimeoutMs before connecting', async () => {
    for (const stallTimeoutMs of [-1, 1.5, Number.NaN, 2 ** 40]) {
      await assert.rejects(
        connectRedis({ url: redis.server.url, stallTimeoutMs }),
        (error: unknown) =>
          error instanceof InvalidInputError && error.field === 'options.stallTimeoutMs',
      );
    }
  });
});
