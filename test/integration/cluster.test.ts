/**
 * sluice on a real Redis Cluster (3 primaries + 3 replicas on loopback, started once for the
 * file), through each cluster client it recognises — node-redis `createCluster()`, the
 * ioredis `Cluster` and Valkey GLIDE's `GlideClusterClient`: exact counts from several clients over hundreds of tenants spread over
 * every primary, `takeAll` all or nothing, a flushed script cache, a manual failover and a
 * live slot migration under load — never a scope over its limit, only decisions or typed
 * errors (`UnavailableError`, `TimeoutError`).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { GlideClusterClient, Logger } from '@valkey/valkey-glide';
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { createClient, createCluster } from 'redis';
import type { Decision, Policy } from 'sluice';
import {
  concurrency,
  fixedWindow,
  RateLimiter,
  type RateLimiterOptions,
  RedisConfigError,
} from 'sluice';
import { IOREDIS_CLUSTER_OPTIONS } from 'sluice/ioredis';
import { connectRedis } from 'sluice/node-redis';
import { GLIDE_CLUSTER_OPTIONS } from 'sluice/valkey-glide';
import { keyFor, randomTenant, TEST_TIMEOUT_MS } from '../helpers/redis.js';
import { type Load, type RedisCluster, startLoad, useRedisCluster } from '../helpers/topology.js';

// Registered before the cluster's `after`, so every client closes while its nodes run.
const closers: (() => void)[] = [];
after(() => {
  for (const close of closers) close();
});
const fixture = useRedisCluster();
// GLIDE's core logs every error reply at WARN on stdout.
Logger.setLoggerConfig('off');
const route = 'POST/orders';
/** Only these may reach a caller while the cluster changes. */
const TYPED = new Set(['SLUICE_UNAVAILABLE', 'SLUICE_TIMEOUT']);

/** Each cluster client sluice recognises, created as the README says, connected. */
const CLIENTS: Record<string, () => Promise<RateLimiterOptions['client']>> = {
  'node-redis createCluster': async () => {
    const client = createCluster({
      rootNodes: [...fixture.value.rootNodes],
      defaults: { disableOfflineQueue: true },
    });
    client.on('error', () => {}); // the tests assert on the typed outcomes instead
    await client.connect();
    closers.push(() => client.destroy());
    return client as unknown as RateLimiterOptions['client'];
  },
  'ioredis Cluster': async () => {
    const client = new Cluster(
      fixture.value.rootNodes.map(({ url }) => {
        const { hostname, port } = new URL(url);
        return { host: hostname, port: Number(port) };
      }),
      {
        enableOfflineQueue: false,
        retryDelayOnFailover: 0,
        redisOptions: {
          autoResendUnfulfilledCommands: false,
          maxRetriesPerRequest: 0,
          socketTimeout: 10_000,
        },
        lazyConnect: true,
      },
    );
    client.on('error', () => {});
    closers.push(() => client.disconnect());
    await client.connect();
    // Ready means the slot map is loaded, not that every primary's connection is up; with
    // retryDelayOnFailover: 0 (required: ioredis would resend a call refused with
    // "Connection is closed", which may have run) a call racing a node connection still
    // being set up fails with UnavailableError. Start the tests once every primary answers.
    // After the failovers and migrations of earlier tests, also once its slot map names only
    // primaries it has connections to: a batch for a primary it does not list yet is sent
    // again request by request (RerouteError), and those race the same settling.
    await until(
      'every primary of the ioredis Cluster answers, and its slot map names them',
      async () => {
        const primaries = client.nodes('master');
        if (primaries.length < 3) return false;
        const listed = new Set(
          primaries.map((node) => `${node.options.host}:${node.options.port}`),
        );
        for (const owners of client.slots) {
          if (owners !== undefined && !listed.has(owners[0] as string)) return false;
        }
        try {
          await Promise.all(primaries.map((node) => node.ping()));
          return true;
        } catch {
          return false;
        }
      },
    );
    return client as unknown as RateLimiterOptions['client'];
  },
  'valkey-glide GlideClusterClient': async () => {
    const client = await GlideClusterClient.createClient({
      addresses: fixture.value.rootNodes.map(({ url }) => {
        const { hostname, port } = new URL(url);
        return { host: hostname, port: Number(port) };
      }),
      ...GLIDE_CLUSTER_OPTIONS,
    });
    closers.push(() => client.close());
    return client as unknown as RateLimiterOptions['client'];
  },
};

/** The slot of `{ tenant, route }`'s key under `policy` (every key of a tenant shares it). */
function slotOf(policy: Policy, tenant: string, scopeRoute: string | undefined = route): number {
  return calculateSlot(keyFor(policy, tenant, scopeRoute));
}

/** Runs `fn` with a plain client on one node (commands that name no key, or keys it serves). */
async function onNode<T>(
  port: number,
  fn: (client: {
    get(key: string): Promise<unknown>;
    sendCommand(args: string[]): Promise<unknown>;
  }) => Promise<T>,
): Promise<T> {
  const client = createClient({ url: `redis://127.0.0.1:${port}` });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    client.destroy();
  }
}

/** `INFO errorstats` and script calls of one node. */
async function nodeStats(cluster: RedisCluster, port: number) {
  const errors = await cluster.command(port, 'INFO', 'errorstats');
  const commands = await cluster.command(port, 'INFO', 'commandstats');
  const count = (text: string, re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
  return {
    noscript: count(errors, /^errorstat_NOSCRIPT:count=(\d+)/m),
    crossslot: count(errors, /^errorstat_CROSSSLOT:count=(\d+)/m),
    scriptCalls:
      count(commands, /^cmdstat_evalsha:calls=(\d+)/m) +
      count(commands, /^cmdstat_eval:calls=(\d+)/m),
  };
}

/** The failures of `load` that are not typed errors. */
function untyped(load: Load): string[] {
  return [...load.errors.keys()]
    .filter((code) => !TYPED.has(code))
    .map((code) => `${code}: ${load.messages.get(code)}`);
}

/** Waits until `check` holds, polling every 20 ms; fails naming `what` after `ms`. */
async function until(what: string, check: () => Promise<boolean> | boolean, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`not within ${ms} ms: ${what}`);
    await sleep(20);
  }
}

/** Whether `label` was denied by a call issued after `at`. */
function deniedAfter(load: Load, label: string, at: number): boolean {
  for (let i = load.events.length - 1; i >= 0; i--) {
    const e = load.events[i] as Load['events'][number];
    if (e.at <= at) return false;
    if (e.issuedAt > at && e.label === label && e.outcome === 'denied') return true;
  }
  return false;
}

/**
 * Asserts that a peek (of cost 1) shows `used` of `limit` spent: its `remaining` is what is
 * left now, and it admits while something is.
 */
function assertUsed(peek: Decision, limit: number, used: number, what: string): void {
  assert.equal(peek.allowed, used < limit, what);
  assert.equal(peek.remaining, limit - used, what);
}

for (const [name, connect] of Object.entries(CLIENTS)) {
  describe(`Redis Cluster (${name})`, () => {
    const limiters = (count: number, options: Omit<RateLimiterOptions, 'client' | 'store'>) =>
      Promise.all(
        Array.from(
          { length: count },
          async () =>
            new RateLimiter({
              timeoutMs: TEST_TIMEOUT_MS,
              client: await connect(),
              onWarning: () => {},
              ...options,
            }),
        ),
      );

    it('300 tenants over every primary × 5 concurrent takes from 3 clients, limit 3 → exactly 3 each', async () => {
      const cluster = fixture.value;
      const policy = fixedWindow({ limit: 3, windowMs: 600_000 });
      const salt = randomTenant();
      const tenants = Array.from({ length: 300 }, (_, i) => `${salt}-${i}`);
      // Before the clients connect (a loaded run saw an ioredis node connection closed under
      // the first calls after a storm of look-ups here; it is one CLUSTER SLOTS now).
      const owners = new Set(await cluster.primariesOf(tenants.map((t) => slotOf(policy, t))));
      assert.equal(owners.size, 3, 'the tenants are spread over every primary');
      const clients = await limiters(3, { timeoutMs: 5000 });
      const decisions = await Promise.all(
        tenants.flatMap((tenant) =>
          [0, 1, 2, 0, 1].map((c) => (clients[c] as RateLimiter).take({ tenant, route }, policy)),
        ),
      );
      const admitted = new Map<string, number>();
      decisions.forEach((d, i) => {
        const tenant = tenants[Math.floor(i / 5)] as string;
        if (d.allowed) admitted.set(tenant, (admitted.get(tenant) ?? 0) + 1);
      });
      assert.equal(decisions.filter((d) => d.allowed).length, 900);
      for (const tenant of tenants) assert.equal(admitted.get(tenant), 3, tenant);
    });

    it('start-up checks read every primary: an evicting policy on one of them is reported', async () => {
      const cluster = fixture.value;
      const primaries = (await cluster.shards()).map((shard) => shard.primary);
      const last = primaries[primaries.length - 1] as number;
      await onNode(last, (c) =>
        c.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru']),
      );
      try {
        const warnings: { code: string; node?: string }[] = [];
        new RateLimiter({
          timeoutMs: TEST_TIMEOUT_MS,
          client: await connect(),
          onWarning: (warning) => warnings.push({ code: warning.code, node: warning.facts.node }),
        });
        await until('the eviction warning', () => warnings.length > 0, 5000);
        await new Promise((resolve) => setTimeout(resolve, 100));
        // Every primary has a replica and no min-replicas-to-write: warned once too.
        assert.deepEqual(warnings.map((w) => w.code).sort(), [
          'SLUICE_EVICTION_POLICY',
          'SLUICE_NO_MIN_REPLICAS',
        ]);
        const eviction = warnings.find((w) => w.code === 'SLUICE_EVICTION_POLICY');
        assert.match(eviction?.node ?? '', new RegExp(`:${last}$`));
      } finally {
        await onNode(last, (c) =>
          c.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'noeviction']),
        );
      }
    });

    it('a turn’s takes reach each primary in batches spanning slots (not refused with CROSSSLOT)', async () => {
      const cluster = fixture.value;
      const [limiter] = (await limiters(1, { timeoutMs: 5000 })) as [RateLimiter];
      const policy = fixedWindow({ limit: 10, windowMs: 600_000 });
      const salt = randomTenant();
      const tenants = Array.from({ length: 90 }, (_, i) => `${salt}-${i}`);
      await Promise.all(tenants.map((tenant) => limiter.take({ tenant, route }, policy)));
      const primaries = (await cluster.shards()).map((shard) => shard.primary);
      const before = await Promise.all(primaries.map((port) => nodeStats(cluster, port)));
      await Promise.all(tenants.map((tenant) => limiter.take({ tenant, route }, policy)));
      const after = await Promise.all(primaries.map((port) => nodeStats(cluster, port)));
      const calls = after.map((a, i) => a.scriptCalls - (before[i]?.scriptCalls ?? 0));
      const refused = after.map((a, i) => a.crossslot - (before[i]?.crossslot ?? 0));
      assert.deepEqual(refused, [0, 0, 0], 'CROSSSLOT refusals per primary');
      // About 30 takes per primary, each of its own slot, in batches of at least 4 (each its
      // share of what the node has in flight; the cuts: test/unit/coalescer.test.ts), and
      // maybe the reset-epoch poll (every 250 ms, on one node).
      assert.ok(
        calls.every((n) => n >= 1 && n <= 30 / 4 + 1),
        `script calls per primary for one turn: ${calls}`,
      );
    });

    it('takeAll of a tenant-wide and per-route limits: all or nothing, on every primary', async () => {
      const clients = await limiters(3, { timeoutMs: 5000 });
      const tenantWide = fixedWindow({ limit: 4, windowMs: 600_000 });
      const perRoute = fixedWindow({ limit: 3, windowMs: 600_000, version: 'route' });
      const salt = randomTenant();
      const tenants = Array.from({ length: 60 }, (_, i) => `${salt}-${i}`);
      const routes = ['GET/a', 'GET/b'] as const;
      // 10 calls per tenant, 5 per route, across the 3 clients: exactly 4 admitted (the
      // tenant-wide limit) whatever the order, and a refused call consumes nothing of either.
      const results = await Promise.all(
        tenants.flatMap((tenant) =>
          Array.from({ length: 10 }, async (_, i) => {
            const r = routes[i % 2] as string;
            const result = await (clients[i % 3] as RateLimiter).takeAll([
              { scope: { tenant }, policy: tenantWide },
              { scope: { tenant, route: r }, policy: perRoute },
            ]);
            return { tenant, route: r, result };
          }),
        ),
      );
      const [a, b] = clients as [RateLimiter, RateLimiter];
      for (const tenant of tenants) {
        const mine = results.filter((x) => x.tenant === tenant);
        const admitted = mine.filter((x) => x.result.allowed);
        assert.equal(admitted.length, 4, tenant);
        for (const x of mine) {
          assert.ok(
            x.result.decisions.every((d) => d.allowed === x.result.allowed),
            tenant,
          );
        }
        assert.equal((await a.peek({ tenant }, tenantWide)).allowed, false, tenant);
        for (const r of routes) {
          const taken = admitted.filter((x) => x.route === r).length;
          assertUsed(await b.peek({ tenant, route: r }, perRoute), 3, taken, `${tenant} ${r}`);
        }
      }
      const owners = new Set(
        await fixture.value.primariesOf(tenants.map((t) => slotOf(tenantWide, t, undefined))),
      );
      assert.equal(owners.size, 3, 'the tenants are spread over every primary');
    });

    it('leases of 60 tenants over every primary from 3 clients: never more than the limit held, all served, stacked with a rate limit', async () => {
      const clients = await limiters(3, { timeoutMs: 5000 });
      const running = concurrency({ limit: 2, leaseMs: 5000 });
      const hourly = fixedWindow({ limit: 25, windowMs: 600_000, version: 'leases' });
      const salt = randomTenant();
      const tenants = Array.from({ length: 60 }, (_, i) => `${salt}-${i}`);
      const held = new Map<string, number>();
      let most = 0;
      // 12 waiters per tenant, 4 per client, each holding its lease 1–10 ms.
      const granted = await Promise.all(
        tenants.flatMap((tenant) =>
          Array.from({ length: 12 }, async (_, i) => {
            const limiter = clients[i % 3] as RateLimiter;
            const lease = await limiter.wait({ tenant, route }, running, { maxWaitMs: 20_000 });
            if (!lease.allowed) return 0;
            const now = (held.get(tenant) ?? 0) + 1;
            held.set(tenant, now);
            most = Math.max(most, now);
            await sleep(1 + Math.random() * 9);
            held.set(tenant, (held.get(tenant) ?? 0) - 1);
            assert.equal(await lease.release(), true);
            return 1;
          }),
        ),
      );
      assert.ok(most <= 2, `${most} leases held at once`);
      assert.equal(
        granted.reduce((a: number, b) => a + b, 0),
        720,
      );
      const owners = new Set(
        await fixture.value.primariesOf(tenants.map((t) => slotOf(running, t))),
      );
      assert.equal(owners.size, 3, 'the tenants are spread over every primary');
      // Stacked: a lease and an hourly take, all or nothing, in the tenant's slot.
      const [a] = clients as [RateLimiter];
      const tenant = tenants[0] as string;
      const items = [
        { scope: { tenant }, policy: hourly },
        { scope: { tenant, route }, policy: running },
      ];
      const [r1, r2, r3] = [await a.takeAll(items), await a.takeAll(items), await a.takeAll(items)];
      assert.deepEqual([r1.allowed, r2.allowed, r3.allowed], [true, true, false]);
      assert.equal((await a.peek({ tenant }, hourly)).remaining, 23, 'the refusal took nothing');
      for (const lease of [...(r1.leases ?? []), ...(r2.leases ?? [])]) {
        assert.equal(await lease.release(), true);
      }
    });

    it('SCRIPT FLUSH on one primary: NOSCRIPT never reaches a caller', async () => {
      const cluster = fixture.value;
      const [limiter] = (await limiters(1, { timeoutMs: 5000 })) as [RateLimiter];
      const policy = fixedWindow({ limit: 5, windowMs: 600_000 });
      const salt = randomTenant();
      const tenants = Array.from({ length: 150 }, (_, i) => `${salt}-${i}`);
      const take = () =>
        Promise.all(tenants.map((tenant) => limiter.take({ tenant, route }, policy)));
      await take(); // every script cached on every primary
      const target = (await cluster.shards())[0]?.primary as number;
      const onTarget = (await cluster.primariesOf(tenants.map((t) => slotOf(policy, t)))).map(
        (port) => port === target,
      );
      assert.ok(onTarget.some(Boolean), 'some tenants live on the flushed node');
      const before = (await nodeStats(cluster, target)).noscript;
      await onNode(target, (client) => client.sendCommand(['SCRIPT', 'FLUSH']));
      const settled = await Promise.allSettled([take(), take()]);
      assert.deepEqual(
        settled.map((d) => d.status),
        ['fulfilled', 'fulfilled'],
        String(settled.find((d) => d.status === 'rejected')?.reason),
      );
      const after = (await nodeStats(cluster, target)).noscript;
      assert.ok(after > before, 'the flushed node answered NOSCRIPT (and sluice reloaded)');
      for (const tenant of tenants) {
        assertUsed(await limiter.peek({ tenant, route }, policy), 5, 3, tenant);
      }
    });

    it('CLUSTER FAILOVER of a shard under load: the counts carry over, only decisions or typed errors', async () => {
      const cluster = fixture.value;
      const clients = await limiters(3, { timeoutMs: 1000, denialCache: false });
      const limit = 150;
      const policy = fixedWindow({ limit, windowMs: 600_000 });
      // A shard as it is now (an earlier run may have swapped its roles).
      await cluster.settled();
      const shard = (await cluster.shards()).find((s) => s.replicas.length > 0);
      const replica = shard?.replicas[0];
      assert.ok(shard !== undefined && replica !== undefined);
      const salt = randomTenant();
      const tenants = Array.from({ length: 60 }, (_, i) => `${salt}-${i}`);
      const owners = await cluster.primariesOf(tenants.map((t) => slotOf(policy, t)));
      const moved = tenants.filter((_, i) => owners[i] === shard.primary);
      assert.ok(moved.length > 0, 'some tenants live on the shard that fails over');
      const load = startLoad(48, (w, n) => {
        const tenant = tenants[(w * 7 + n) % tenants.length] as string;
        const limiter = clients[w % clients.length] as RateLimiter;
        return [tenant, () => limiter.take({ tenant, route }, policy)];
      });
      try {
        const admittedOnShard = () =>
          moved.reduce((sum, t) => sum + (load.admitted.get(t) ?? 0), 0);
        await until(
          'a third of the shard’s quota admitted',
          () => admittedOnShard() >= (moved.length * limit) / 3,
        );
        const failoverAt = performance.now();
        const admittedBefore = admittedOnShard();
        await cluster.command(replica, 'CLUSTER', 'FAILOVER');
        await until('the replica took over', async () =>
          (await cluster.command(replica, 'ROLE')).startsWith('master'),
        );
        const promotedAt = performance.now();
        await until(
          'every tenant of the shard refused by its new primary',
          () => moved.every((t) => deniedAfter(load, t, promotedAt)),
          15_000,
        );
        await load.stop();
        await cluster.settled(); // every node knows the new roles before the next test
        assert.deepEqual(untyped(load), [], 'only decisions or typed errors');
        // A batch the stale slot map still sent to the demoted primary was refused there
        // before it ran (READONLY) and resent call by call, never failed to its callers.
        const readonly = load.events.filter((e) => e.message?.includes('READONLY')).length;
        assert.equal(readonly, 0, 'READONLY reached callers');
        for (const tenant of tenants) {
          const admitted = load.admitted.get(tenant) ?? 0;
          assert.ok(admitted <= limit, `${tenant}: ${admitted} admitted, limit ${limit}`);
        }
        // The counter continued on the promoted replica: nothing admitted was forgotten.
        await onNode(replica, async (client) => {
          for (const tenant of moved) {
            const counted = Number(await client.get(keyFor(policy, tenant, route)));
            assert.equal(counted, limit, `${tenant} at its limit on the new primary`);
          }
        });
        const admittedAfter = load.events.filter(
          (e) => e.issuedAt > promotedAt && e.outcome === 'admitted' && moved.includes(e.label),
        ).length;
        console.log(
          JSON.stringify({
            clusterFailover: {
              client: name,
              promotedAfterMs: Math.round(promotedAt - failoverAt),
              admittedOnShard: { beforeFailover: admittedBefore, afterPromotion: admittedAfter },
              errors: Object.fromEntries(load.errors),
              messages: Object.fromEntries(load.messages),
            },
          }),
        );
      } finally {
        await load.stop();
      }
    });

    it('a busy scope’s slot migrated live under load: never over the limit, only decisions or typed errors', async () => {
      const cluster = fixture.value;
      const clients = await limiters(3, { timeoutMs: 1000, denialCache: false });
      const limit = 1000;
      const policy = fixedWindow({ limit, windowMs: 600_000 });
      const busy = randomTenant();
      const key = keyFor(policy, busy, route);
      const slot = calculateSlot(key);
      await cluster.settled();
      const source = await cluster.primaryOf(slot);
      const target = (await cluster.shards()).find((s) => s.primary !== source)?.primary as number;
      const sourceId = cluster.node(source).id;
      const targetId = cluster.node(target).id;
      const others = Array.from({ length: 30 }, (_, i) => `${busy}-other-${i}`);
      const load = startLoad(48, (w, n) => {
        const tenant = w % 4 === 0 ? (others[(w + n) % others.length] as string) : busy;
        const limiter = clients[w % clients.length] as RateLimiter;
        return [tenant, () => limiter.take({ tenant, route }, policy)];
      });
      try {
        await until(
          'a fifth of the busy scope’s quota admitted',
          () => (load.admitted.get(busy) ?? 0) >= limit / 5,
        );
        const admittedBefore = load.admitted.get(busy) ?? 0;
        // What `redis-cli --cluster reshard` does, by hand, for one slot.
        const s = String(slot);
        await cluster.command(target, 'CLUSTER', 'SETSLOT', s, 'IMPORTING', sourceId);
        await cluster.command(source, 'CLUSTER', 'SETSLOT', s, 'MIGRATING', targetId);
        for (;;) {
          const out = await cluster.command(source, 'CLUSTER', 'GETKEYSINSLOT', s, '100');
          const keys = out.split('\n').filter((k) => k !== '');
          if (keys.length === 0) break;
          await cluster.command(
            source,
            'MIGRATE',
            '127.0.0.1',
            String(target),
            '',
            '0',
            '5000',
            'KEYS',
            ...keys,
          );
        }
        await cluster.command(target, 'CLUSTER', 'SETSLOT', s, 'NODE', targetId);
        await cluster.command(source, 'CLUSTER', 'SETSLOT', s, 'NODE', targetId);
        const movedAt = performance.now();
        const admittedDuring = (load.admitted.get(busy) ?? 0) - admittedBefore;
        await until(
          'the busy scope refused by its new node',
          () => deniedAfter(load, busy, movedAt),
          15_000,
        );
        await load.stop();
        assert.deepEqual(untyped(load), [], 'only decisions or typed errors');
        const admitted = load.admitted.get(busy) ?? 0;
        assert.ok(admitted <= limit, `${admitted} admitted, limit ${limit}`);
        for (const tenant of others) assert.ok((load.admitted.get(tenant) ?? 0) <= limit);
        await cluster.settled();
        assert.equal(await cluster.primaryOf(slot), target);
        const counted = await onNode(target, (client) => client.get(key));
        assert.equal(Number(counted), limit, 'the counter moved with its slot');
        console.log(
          JSON.stringify({
            slotMigration: {
              client: name,
              admitted: { beforeMove: admittedBefore, duringMove: admittedDuring, total: admitted },
              errors: Object.fromEntries(load.errors),
              messages: Object.fromEntries(load.messages),
            },
          }),
        );
      } finally {
        await load.stop();
      }
    });
  });
}

describe('a single-node client on a cluster node', () => {
  it('is reported at start (SLUICE_CLUSTER_NODE): only that node’s slots could be decided', async () => {
    const port = (await fixture.value.shards())[0]?.primary as number;
    const client = await connectRedis({ url: `redis://127.0.0.1:${port}`, onError: () => {} });
    try {
      const warnings: string[] = [];
      new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client,
        onWarning: (warning) => warnings.push(warning.code),
      });
      await until('the cluster-node warning', () => warnings.length > 1, 5000);
      assert.deepEqual(warnings.sort(), ['SLUICE_CLUSTER_NODE', 'SLUICE_NO_MIN_REPLICAS']);
    } finally {
      client.destroy();
    }
  });
});

describe('an ioredis Cluster whose handshake every node refuses', () => {
  it('an ACL user the cluster does not have: RedisConfigError wrong-password, not an outage', async () => {
    const client = new Cluster(
      fixture.value.rootNodes.map(({ url }) => {
        const { hostname, port } = new URL(url);
        return { host: hostname, port: Number(port) };
      }),
      {
        ...IOREDIS_CLUSTER_OPTIONS,
        redisOptions: { ...IOREDIS_CLUSTER_OPTIONS.redisOptions, username: 'ghost', password: 'x' },
      },
    );
    client.on('error', () => {});
    try {
      const limiter = new RateLimiter({ client, timeoutMs: 500 });
      const scope = { tenant: randomTenant() };
      const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
      const seen: string[] = [];
      await until(
        'RedisConfigError from the cluster client',
        async () => {
          const outcome = await limiter.take(scope, policy).then(
            () => 'allowed',
            (error: unknown) =>
              error instanceof RedisConfigError ? `config:${error.reason}` : String(error),
          );
          seen.push(outcome);
          return outcome.startsWith('config:');
        },
        10_000,
      );
      assert.equal(seen.at(-1), 'config:wrong-password');
      assert.ok(limiter.stats().configError >= 1);
    } finally {
      client.disconnect();
    }
  });
});

describe('fresh cluster clients: the first traffic after a deploy', () => {
  const CLIENTS_PER_KIND = 3;
  const TAKES = 120;
  const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
  const nodes = () =>
    fixture.value.rootNodes.map(({ url }) => {
      const { hostname, port } = new URL(url);
      return { host: hostname, port: Number(port) };
    });
  const FRESH: Record<string, () => Promise<RateLimiterOptions['client']>> = {
    // As docs/cluster.md creates it, and not waited for: the limiter waits.
    'ioredis Cluster': async () => {
      const client = new Cluster(nodes(), { ...IOREDIS_CLUSTER_OPTIONS });
      client.on('error', () => {});
      closers.push(() => client.disconnect());
      return client as unknown as RateLimiterOptions['client'];
    },
    // Ready: the slot map is loaded, the primaries' connections are still being set up.
    'ioredis Cluster, its ready event awaited': async () => {
      const client = new Cluster(nodes(), { ...IOREDIS_CLUSTER_OPTIONS });
      client.on('error', () => {});
      closers.push(() => client.disconnect());
      await new Promise((resolve) => client.once('ready', resolve));
      return client as unknown as RateLimiterOptions['client'];
    },
    'node-redis createCluster': async () => {
      const client = createCluster({
        rootNodes: [...fixture.value.rootNodes],
        defaults: { disableOfflineQueue: true },
      });
      client.on('error', () => {});
      closers.push(() => client.destroy());
      client.connect().catch(() => {});
      return client as unknown as RateLimiterOptions['client'];
    },
  };
  for (const [kind, create] of Object.entries(FRESH)) {
    it(`${kind}: ${CLIENTS_PER_KIND} clients × ${TAKES} takes right after construction admit exactly the limit, with no error; ready() resolves`, async () => {
      const tenant = randomTenant();
      const clients = await Promise.all(Array.from({ length: CLIENTS_PER_KIND }, create));
      const limiters = clients.map(
        (client) => new RateLimiter({ client, timeoutMs: 5_000, onWarning: () => {} }),
      );
      const outcomes = await Promise.all(
        limiters.flatMap((limiter) =>
          Array.from({ length: TAKES }, () =>
            limiter.take({ tenant, route }, policy).then(
              (d) => (d.allowed ? 'allowed' : 'limited'),
              (error: unknown) => `error: ${String(error)}`,
            ),
          ),
        ),
      );
      const count = (o: string) => outcomes.filter((x) => x === o).length;
      const errors = [...new Set(outcomes.filter((o) => o.startsWith('error')))];
      assert.deepEqual(errors, [], 'no call failed');
      assert.equal(count('allowed'), policy.limit);
      assert.equal(count('limited'), CLIENTS_PER_KIND * TAKES - policy.limit);
      for (const limiter of limiters) await limiter.ready();
    });
  }
});
