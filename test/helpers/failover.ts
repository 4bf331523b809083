/**
 * One failover under load, measured: a fixed window far longer than the run, several clients
 * (each its own connection, as separate processes would have) taking from one scope with
 * many callers each; once half the quota is admitted the primary serving the scope is failed
 * over — planned (`SENTINEL FAILOVER`, `CLUSTER FAILOVER`), forced (`CLUSTER FAILOVER FORCE`)
 * or killed (`kill -9`) — and the load runs on until the new primary has refused the scope
 * for a while and the old one is a replica (or dead).
 *
 * What it measures: `admitted` against the limit — more is over-admission, decisions callers
 * were told of that the new primary does not count (an old primary that kept deciding beside
 * the new one, or writes the replica had not received) — the typed errors callers got, and
 * how long the scope could not be decided. `safe` runs with the configuration the docs
 * require: `min-replicas-to-write 1` and `min-replicas-max-lag 1` on every node, so that a
 * primary that lost its replica (demoted, partitioned, superseded) refuses decisions.
 *
 * Used by bench/failover (the figures in bench/failover/RESULTS.md) and by
 * test/integration/failover.test.ts (the safe configuration's over-admission is 0).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createCluster, createSentinel } from 'redis';
import { fixedWindow, RateLimiter, type RateLimiterOptions } from 'sluice';
import { scopeKey } from '../../src/key.js';
import { TEST_TIMEOUT_MS } from './redis.js';
import {
  type Load,
  type RedisCluster,
  type RedisSentinel,
  startLoad,
  startRedisCluster,
  startSentinel,
} from './topology.js';

/** How the primary goes. */
export type Trigger = 'sentinel-failover' | 'sentinel-kill' | 'cluster-failover' | 'cluster-force';

export interface FailoverScenario {
  readonly trigger: Trigger;
  /**
   * The configuration the docs require: `min-replicas-to-write 1` and `min-replicas-max-lag 1`
   * on every node, and limiters with `waitForReplicas: 1`.
   */
  readonly safe: boolean;
  /** Separate clients (connections) and callers on each. Default 3 × 16. */
  readonly clients?: number;
  readonly callersPerClient?: number;
  /** The fixed window's limit (its window is 10 minutes). Default 20,000. */
  readonly limit?: number;
  /** node-redis `createSentinel({ scanInterval })`, ms. Default 1000. */
  readonly scanIntervalMs?: number;
}

export interface FailoverFigures {
  readonly trigger: Trigger;
  readonly safe: boolean;
  readonly limit: number;
  /** Admissions callers were told of, in all. */
  readonly admitted: number;
  /** `admitted − limit` when positive: decisions the new primary does not count. */
  readonly overAdmitted: number;
  /** What the new primary counts for the scope at the end. */
  readonly counted: number;
  /** From the trigger to the first decision of a call issued after it that the new primary made. */
  readonly firstDecisionAfterMs: number | undefined;
  /** From the trigger to the last failure. */
  readonly lastFailureAfterMs: number | undefined;
  /** Failures by code, from the trigger on, and the first message of each. */
  readonly errors: Readonly<Record<string, number>>;
  readonly messages: Readonly<Record<string, string>>;
  /**
   * Whether the scope was decided again (refused, at its limit) on the new primary within
   * 20 s of the failover settling. With the safe configuration and one replica, a primary
   * that died leaves the promoted replica with none: it refuses every decision until a
   * replica joins it.
   */
  readonly decidedAgain: boolean;
}

const route = 'POST/orders';

/** Runs one scenario on a topology of its own (started and stopped here). */
export async function measureFailover(scenario: FailoverScenario): Promise<FailoverFigures> {
  return scenario.trigger.startsWith('sentinel') ? sentinelRun(scenario) : clusterRun(scenario);
}

async function sentinelRun(scenario: FailoverScenario): Promise<FailoverFigures> {
  const topology = await startSentinel();
  const closers: (() => Promise<unknown>)[] = [];
  try {
    if (scenario.safe) {
      for (const port of [topology.primary.port, topology.replica.port]) await safe(topology, port);
    }
    const limiters: RateLimiter[] = [];
    for (let i = 0; i < (scenario.clients ?? 3); i++) {
      const sentinel = createSentinel({
        name: topology.name,
        sentinelRootNodes: [...topology.sentinelRootNodes],
        maxCommandRediscovers: 0,
        scanInterval: scenario.scanIntervalMs ?? 1000,
        nodeClientOptions: { disableOfflineQueue: true },
      });
      sentinel.on('error', () => {});
      await sentinel.connect();
      closers.push(() => sentinel.destroy());
      limiters.push(limiter(sentinel, scenario.safe));
    }
    const oldPort = topology.primary.port;
    return await underLoad(scenario, limiters, {
      trigger: async () => {
        if (scenario.trigger === 'sentinel-kill') await topology.kill(oldPort);
        else
          await topology.command(
            topology.sentinels[0]?.port as number,
            'SENTINEL',
            'FAILOVER',
            topology.name,
          );
      },
      settled: async () =>
        (await topology.primaryPort()) === topology.replica.port &&
        (scenario.trigger === 'sentinel-kill' || (await role(topology, oldPort)) === 'slave'),
      count: async (key) => Number(await get(topology, topology.replica.port, key)),
    });
  } finally {
    for (const close of closers) await close().catch(() => {});
    await topology.stop();
  }
}

async function clusterRun(scenario: FailoverScenario): Promise<FailoverFigures> {
  const cluster = await startRedisCluster();
  const closers: (() => Promise<unknown>)[] = [];
  try {
    if (scenario.safe) for (const node of cluster.nodes) await safe(cluster, node.port);
    const limiters: RateLimiter[] = [];
    for (let i = 0; i < (scenario.clients ?? 3); i++) {
      const client = createCluster({
        rootNodes: [...cluster.rootNodes],
        defaults: { disableOfflineQueue: true },
      });
      client.on('error', () => {});
      await client.connect();
      closers.push(async () => client.destroy());
      limiters.push(limiter(client, scenario.safe));
    }
    // The primary of the scope's slot, and its replica, which takes over.
    const probe = fixedWindow({ limit: scenario.limit ?? 20_000, windowMs: 600_000 });
    const slotKey = scopeKey('rate', probe.id, 'failover', route, undefined);
    const { default: calculateSlot } = await import('cluster-key-slot');
    const slot = calculateSlot(slotKey);
    const primaryPort = await cluster.primaryOf(slot);
    const shard = (await cluster.shards()).find((s) => s.primary === primaryPort);
    const replicaPort = shard?.replicas[0] as number;
    return await underLoad(scenario, limiters, {
      tenant: 'failover',
      trigger: async () => {
        const args = scenario.trigger === 'cluster-force' ? ['FAILOVER', 'FORCE'] : ['FAILOVER'];
        await cluster.command(replicaPort, 'CLUSTER', ...args);
      },
      settled: async () =>
        (await cluster.primaryOf(slot)) === replicaPort &&
        /^slave/.test((await cluster.command(primaryPort, 'ROLE')).trim()),
      count: async (key) => Number((await cluster.command(replicaPort, 'GET', key)).trim() || 0),
    });
  } finally {
    for (const close of closers) await close().catch(() => {});
    await cluster.stop();
  }
}

function limiter(client: unknown, safe: boolean): RateLimiter {
  return new RateLimiter({
    timeoutMs: TEST_TIMEOUT_MS,
    client: client as RateLimiterOptions['client'],
    onWarning: () => {},
    // Every decision from Redis: a denial cached from the old primary would hide what the
    // new one counts (it errs the safe way: a cached denial may outlive counts a failover lost).
    denialCache: false,
    ...(safe ? { waitForReplicas: 1 } : {}),
  });
}

interface Steps {
  /** A tenant of a known slot (cluster), else a random one. */
  readonly tenant?: string;
  trigger(): Promise<void>;
  /** The new primary serves the scope and the old one is a replica (or dead). */
  settled(): Promise<boolean>;
  /** What the new primary counts for `key`. */
  count(key: string): Promise<number>;
}

async function underLoad(
  scenario: FailoverScenario,
  limiters: readonly RateLimiter[],
  steps: Steps,
): Promise<FailoverFigures> {
  const limit = scenario.limit ?? 20_000;
  const policy = fixedWindow({ limit, windowMs: 600_000 });
  const tenant = steps.tenant ?? `failover-${Math.random().toString(36).slice(2)}`;
  const callers = limiters.length * (scenario.callersPerClient ?? 16);
  const load: Load = startLoad(callers, (w) => [
    tenant,
    () => (limiters[w % limiters.length] as RateLimiter).take({ tenant, route }, policy),
  ]);
  try {
    await waitUntil(() => (load.admitted.get(tenant) ?? 0) >= limit / 2, 30_000);
    const triggeredAt = performance.now();
    await steps.trigger();
    // Settled, and every client decided (refused) on the new primary for a second.
    await waitUntilAsync(steps.settled, 60_000);
    const settledAt = performance.now();
    const decidedAgain = await waitUntil(() => {
      const recent = load.events.filter((e) => e.issuedAt > settledAt);
      return recent.length > 100 && recent.slice(-100).every((e) => e.outcome === 'denied');
    }, 20_000).then(
      () => true,
      () => false,
    );
    await sleep(1000);
    await load.stop();
    const after = load.events.filter((e) => e.at > triggeredAt);
    const failures = after.filter((e) => e.outcome !== 'admitted' && e.outcome !== 'denied');
    const errors: Record<string, number> = {};
    for (const e of failures) errors[e.outcome] = (errors[e.outcome] ?? 0) + 1;
    const admitted = load.admitted.get(tenant) ?? 0;
    const key = scopeKey('rate', policy.id, tenant, route, undefined);
    const firstAfter = after.find(
      (e) => e.issuedAt > triggeredAt && (e.outcome === 'admitted' || e.outcome === 'denied'),
    );
    const lastFailure = failures.at(-1);
    return {
      trigger: scenario.trigger,
      safe: scenario.safe,
      limit,
      admitted,
      overAdmitted: Math.max(0, admitted - limit),
      counted: await steps.count(key),
      firstDecisionAfterMs:
        firstAfter === undefined ? undefined : Math.round(firstAfter.at - triggeredAt),
      lastFailureAfterMs:
        lastFailure === undefined ? undefined : Math.round(lastFailure.at - triggeredAt),
      errors,
      messages: Object.fromEntries(
        Object.keys(errors).map((code) => [code, load.messages.get(code) ?? '']),
      ),
      decidedAgain,
    };
  } finally {
    await load.stop();
  }
}

async function safe(
  topology: Pick<RedisSentinel, 'command'> | Pick<RedisCluster, 'command'>,
  port: number,
): Promise<void> {
  await topology.command(port, 'CONFIG', 'SET', 'min-replicas-to-write', '1');
  await topology.command(port, 'CONFIG', 'SET', 'min-replicas-max-lag', '1');
}

async function role(topology: RedisSentinel, port: number): Promise<string> {
  return (await topology.command(port, 'ROLE')).trim().split('\n')[0] ?? '';
}

async function get(topology: RedisSentinel, port: number, key: string): Promise<string> {
  return (await topology.command(port, 'GET', key)).trim();
}

async function waitUntil(check: () => boolean, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`not within ${ms} ms`);
    await sleep(20);
  }
}

async function waitUntilAsync(check: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check().catch(() => false))) {
    if (performance.now() > deadline) throw new Error(`not settled within ${ms} ms`);
    await sleep(100);
  }
}
