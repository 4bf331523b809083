/**
 * `waitForReplicas` when a replica stops answering (SIGSTOP): the decision that ran is
 * refused with `UnavailableError` — never `TimeoutError`, since the `WAIT` gets half the
 * deadline — and from then on the node's calls fail at once without running, one probe at
 * a time, until the replica acknowledges again (SIGCONT). Before, every call waited out a
 * `WAIT` as long as its deadline and timed out, the `WAIT`s queued behind one another on
 * the connection, and the application's own commands on an ioredis client waited behind
 * them (953 ms for a PING).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { fixedWindow, isSluiceError, RateLimiter, type RateLimiterOptions } from 'sluice';
import { IOREDIS_OPTIONS } from 'sluice/ioredis';
import { connectRedis } from 'sluice/node-redis';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { randomTenant } from '../helpers/redis.js';

const TIMEOUT_MS = 1000;
const policy = fixedWindow({ limit: 1000, windowMs: 60_000 });

const servers: PrivateRedis[] = [];
const closers: (() => unknown)[] = [];
let frozen: number | undefined;
// A replica's full sync writes an RDB file: in here, not in the working directory.
const dir = mkdtempSync(join(tmpdir(), 'sluice-wait-'));
after(async () => {
  if (frozen !== undefined) process.kill(frozen, 'SIGCONT');
  for (const close of closers) await Promise.resolve(close()).catch(() => {});
  for (const server of servers) await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A primary and one replica that acknowledges what the primary writes. */
async function primaryWithReplica(): Promise<{ primary: PrivateRedis; replica: PrivateRedis }> {
  const primary = await startRedisServer([
    ...['--dir', dir, '--dbfilename', `p${servers.length}.rdb`],
    // The full sync starts at once (Redis 7.0 waits 5 s for more replicas by default).
    ...['--repl-diskless-sync-delay', '0'],
  ]);
  servers.push(primary);
  const replica = await startRedisServer([
    ...['--dir', dir, '--dbfilename', `r${servers.length}.rdb`],
    ...['--replicaof', '127.0.0.1', String(primary.port)],
  ]);
  servers.push(replica);
  const admin = await connectRedis({ url: primary.url, onError: () => {} });
  closers.push(() => admin.destroy());
  // Online is not enough: a replica still loading the sync acknowledges nothing yet. Ready
  // once it acknowledges a write (on a loaded machine that can take a while: here, not in
  // the first take's WAIT).
  for (let i = 0; i < 200; i++) {
    await admin.client.sendCommand(['SET', 'sluice-test:wait', String(i), 'PX', '60000']);
    const acks = Number(await admin.client.sendCommand(['WAIT', '1', '100']));
    if (acks >= 1) return { primary, replica };
    await sleep(25);
  }
  throw new Error('the replica acknowledged no write in 25 s');
}

/** `allowed`, or the error's code, and how long the call took. */
async function timed(
  limiter: RateLimiter,
  tenant: string,
): Promise<{ outcome: string; ms: number }> {
  const started = performance.now();
  const outcome = await limiter.take({ tenant }, policy).then(
    (d) => (d.allowed ? 'allowed' : 'limited'),
    (error: unknown) => (isSluiceError(error) ? error.code : `untyped: ${String(error)}`),
  );
  return { outcome, ms: performance.now() - started };
}

describe('waitForReplicas with a replica that stops answering', () => {
  for (const kind of ['connectRedis', 'ioredis'] as const) {
    it(`${kind}: UnavailableError within the deadline, then at once without running; back once the replica is`, async () => {
      const { primary, replica } = await primaryWithReplica();
      let client: unknown;
      let ping: (() => Promise<unknown>) | undefined;
      if (kind === 'connectRedis') {
        const c = await connectRedis({ url: primary.url, onError: () => {} });
        closers.push(() => c.destroy());
        client = c;
      } else {
        const c = new Redis({ port: primary.port, ...IOREDIS_OPTIONS });
        c.on('error', () => {});
        closers.push(() => c.disconnect());
        await new Promise((resolve) => c.once('ready', resolve));
        client = c;
        ping = () => c.ping();
      }
      const limiter = new RateLimiter({
        client: client as RateLimiterOptions['client'],
        timeoutMs: TIMEOUT_MS,
        waitForReplicas: 1,
        denialCache: false,
      });
      const tenant = randomTenant();
      assert.equal((await timed(limiter, tenant)).outcome, 'allowed');

      process.kill(replica.pid, 'SIGSTOP');
      frozen = replica.pid;
      // The call that finds the replica silent: it ran, and is refused within the deadline.
      const first = await timed(limiter, tenant);
      assert.equal(first.outcome, 'SLUICE_UNAVAILABLE', 'not a timeout');
      assert.ok(first.ms < TIMEOUT_MS, `answered in ${first.ms.toFixed(0)} ms`);

      // Now a probe at a time: the rest fail at once, and none of them runs.
      // Units used: a peek answers the units left now.
      const counted = () =>
        limiter.peek({ tenant }, policy).then((d) => policy.limit - d.remaining);
      const probe = timed(limiter, tenant);
      const rest = await Promise.all(
        Array.from({ length: 20 }, async () => {
          await sleep(5); // after the probe was sent
          return timed(limiter, tenant);
        }),
      );
      for (const r of rest) {
        assert.equal(r.outcome, 'SLUICE_UNAVAILABLE');
        assert.ok(r.ms < TIMEOUT_MS / 4, `failed fast: ${r.ms.toFixed(0)} ms`);
      }
      if (ping !== undefined) {
        const started = performance.now();
        await ping();
        const ms = performance.now() - started;
        assert.ok(ms < TIMEOUT_MS, `the application's own PING waited ${ms.toFixed(0)} ms`);
      }
      assert.equal((await probe).outcome, 'SLUICE_UNAVAILABLE');
      assert.equal(limiter.stats().timeout, 0, 'no call timed out');
      // What ran: the first take, the call that found the replica silent and the probe —
      // none of the 20 that failed at once (a peek waits for no replica).
      assert.equal(await counted(), 3);

      process.kill(replica.pid, 'SIGCONT');
      frozen = undefined;
      let back: string | undefined;
      for (let i = 0; i < 100 && back !== 'allowed'; i++) {
        back = (await timed(limiter, tenant)).outcome;
        if (back !== 'allowed') await sleep(20);
      }
      assert.equal(back, 'allowed', 'decisions resume once the replica answers');
    });
  }
});
