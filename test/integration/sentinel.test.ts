/**
 * sluice on Redis Sentinel (a primary, a replica, three sentinels on loopback): the primary
 * is killed with `kill -9` under load and the same limiter, on the same node-redis
 * `createSentinel()` client, resumes on the promoted replica without a restart.
 *
 * The test measures and prints (one JSON line) what the README states as the failover
 * guarantee: the time from the kill to the first decision after it, the admissions the
 * failover forgot (asynchronous replication: writes the replica had not received when the
 * primary died) and the typed errors callers got in between.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient, createSentinel } from 'redis';
import { fixedWindow, RateLimiter } from 'sluice';
import { keyFor, randomTenant } from '../helpers/redis.js';
import { type LoadEvent, type RedisSentinel, startLoad, useSentinel } from '../helpers/topology.js';

const opened: { destroy(): Promise<unknown> }[] = [];
after(async () => {
  await Promise.all(opened.map((client) => client.destroy().catch(() => {})));
});
const recommended = useSentinel();
const defaults = useSentinel();
const route = 'POST/orders';
/** Only these may reach a caller during the failover. */
const TYPED = new Set(['SLUICE_UNAVAILABLE', 'SLUICE_TIMEOUT']);
/**
 * How long the limiter may take to decide again after the kill: measured 3.1–3.5 s (down
 * after 1000 ms, election and promotion by ~2.3 s, the client's switch ~1 s later).
 */
const RESUME_BOUND_MS = 20_000;

/** Waits until `check` holds, polling every 20 ms; fails naming `what` after `ms`. */
async function until(what: string, check: () => boolean, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`not within ${ms} ms: ${what}`);
    await sleep(20);
  }
}

/** What one kill under load measured (printed as one JSON line). */
interface Figures {
  /** From the SIGKILL to the first decision of a call issued once the primary was gone. */
  readonly firstDecisionAfterKillMs: number;
  /** From the SIGKILL to the sentinels naming the replica as primary. */
  readonly promotedAfterKillMs: number | undefined;
  /** Admissions callers were told of that the new primary does not count. */
  readonly forgottenAdmissions: number;
  /** Admitted in all minus the limit: > 0 forgotten, < 0 counted for callers told otherwise. */
  readonly admittedMinusLimit: number;
  readonly limit: number;
  readonly admitted: number;
  /** Admissions confirmed by the old primary, and what the replica held when it died. */
  readonly confirmedByOld: number;
  readonly inherited: number;
  /** Failures by code between the kill and the first decision after it, and in all. */
  readonly errorsBetween: Record<string, number>;
  readonly errors: Record<string, number>;
}

/**
 * One scope with a window far longer than the test, under load from 32 callers on one
 * limiter (default options: deadline 150 ms, denial cache on); the primary is killed once
 * half the quota is admitted, and the load runs on until the new primary refuses the scope.
 */
async function killPrimaryUnderLoad(
  topology: RedisSentinel,
  clientOptions: { maxCommandRediscovers?: number },
): Promise<Figures> {
  const sentinel = createSentinel({
    name: topology.name,
    sentinelRootNodes: [...topology.sentinelRootNodes],
    nodeClientOptions: { disableOfflineQueue: true },
    ...clientOptions,
  });
  sentinel.on('error', () => {}); // the test asserts on the typed outcomes instead
  await sentinel.connect();
  opened.push(sentinel);
  const limiter = new RateLimiter({ client: sentinel, onWarning: () => {} });
  const limit = 20_000;
  const policy = fixedWindow({ limit, windowMs: 600_000 });
  const tenant = randomTenant();
  const key = keyFor(policy, tenant, route);
  const load = startLoad(32, () => [tenant, () => limiter.take({ tenant, route }, policy)]);
  try {
    await until('half the quota admitted', () => (load.admitted.get(tenant) ?? 0) >= limit / 2);
    const killAt = performance.now();
    await topology.kill(topology.primary.port);
    const deadAt = performance.now();
    // What the replica holds once its primary is gone: frozen until the sentinels promote it
    // (after down-after-milliseconds), so what the new primary starts from.
    const inherited = Number(await get(topology.replica.port, key));
    let promotedAt: number | undefined;
    const watch = (async () => {
      while (promotedAt === undefined && performance.now() - killAt < RESUME_BOUND_MS) {
        const port = await topology.primaryPort().catch(() => undefined);
        if (port === topology.replica.port) promotedAt = performance.now();
        else await sleep(50);
      }
    })();
    // The first decision of a call issued once the old primary was gone: the new primary's.
    const resumed = (): LoadEvent | undefined =>
      load.events.find((e) => e.issuedAt > deadAt && !isFailure(e));
    await until('a decision after the kill', () => resumed() !== undefined, RESUME_BOUND_MS);
    const first = resumed() as LoadEvent;
    await until('the scope refused by the new primary', () =>
      load.events.some((e) => e.issuedAt > deadAt && e.outcome === 'denied'),
    );
    await load.stop();
    await watch;
    assert.equal(await topology.primaryPort(), topology.replica.port, 'the replica promoted');
    assert.equal(Number(await get(topology.replica.port, key)), limit, 'at its limit on it');
    const errorsBetween: Record<string, number> = {};
    for (const e of load.events) {
      if (e.at > killAt && e.at <= first.at && isFailure(e)) {
        errorsBetween[e.outcome] = (errorsBetween[e.outcome] ?? 0) + 1;
      }
    }
    const confirmedByOld = load.events.filter(
      (e) => e.at < first.at && e.outcome === 'admitted',
    ).length;
    const admitted = load.admitted.get(tenant) ?? 0;
    return {
      firstDecisionAfterKillMs: Math.round(first.at - killAt),
      promotedAfterKillMs: promotedAt === undefined ? undefined : Math.round(promotedAt - killAt),
      forgottenAdmissions: Math.max(0, confirmedByOld - inherited),
      admittedMinusLimit: admitted - limit,
      limit,
      admitted,
      confirmedByOld,
      inherited,
      errorsBetween,
      errors: Object.fromEntries(load.errors),
    };
  } finally {
    await load.stop();
  }
}

function isFailure(e: LoadEvent): boolean {
  return e.outcome !== 'admitted' && e.outcome !== 'denied';
}

/** GET on one node, with a plain client. */
async function get(port: number, key: string): Promise<string | null> {
  const client = createClient({ url: `redis://127.0.0.1:${port}` });
  client.on('error', () => {});
  await client.connect();
  try {
    return await client.get(key);
  } finally {
    client.destroy();
  }
}

function assertTyped(figures: Figures): void {
  assert.deepEqual(
    Object.keys(figures.errors).filter((code) => !TYPED.has(code)),
    [],
    'only decisions or typed errors',
  );
  assert.ok(figures.firstDecisionAfterKillMs < RESUME_BOUND_MS);
}

describe('Redis Sentinel (node-redis createSentinel): kill -9 of the primary under load', () => {
  it('maxCommandRediscovers: 0 — UnavailableError at once, nothing resent; the limiter resumes on the promoted replica (measured)', async () => {
    const figures = await killPrimaryUnderLoad(recommended.value, { maxCommandRediscovers: 0 });
    console.log(JSON.stringify({ sentinelFailover: figures }));
    assertTyped(figures);
    // Callers fail at once while there is no primary (a few may still time out on a busy
    // machine). The forgotten admissions are measured, not asserted: asynchronous
    // replication makes them possible (0 in every run on loopback; see README).
    assert.ok((figures.errorsBetween.SLUICE_UNAVAILABLE ?? 0) > 0, 'UnavailableError at once');
  });

  it('node-redis defaults — calls wait for the new primary and run after their deadline (TimeoutError, still counted)', async () => {
    const figures = await killPrimaryUnderLoad(defaults.value, {});
    console.log(JSON.stringify({ sentinelFailoverClientDefaults: figures }));
    assertTyped(figures);
  });
});
