/**
 * ioredis clients (`Redis`, `Cluster`) given as `new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client })`: recognised at
 * construction (an offline queue refused), exact counts across clients with coalescing,
 * takeAll, NOSCRIPT recovery, and every failure mapped as for node-redis — a closed client
 * or a stopped server is an UnavailableError at once, WRONGTYPE a StoreError and READONLY an
 * UnavailableError, alone and batched. The Cluster's routing runs on a real cluster in the
 * cluster suite; here, its store's `groupOf` and cross-slot batches against a stand-in.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import {
  fixedWindow,
  InvalidInputError,
  RateLimiter,
  type RateLimiterOptions,
  StoreError,
  UnavailableError,
} from 'sluice';
import { IOREDIS_CLUSTER_OPTIONS, IOREDIS_OPTIONS, type IoRedisClusterLike } from 'sluice/ioredis';
import { batchScript, crossSlotBatchScript } from '../../src/algorithms/batch.js';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { IoRedisClusterStore, IoRedisStore } from '../../src/redis/ioredis/stores.js';
import { clientKind, storeFor } from '../../src/redis/select.js';
import { RerouteError } from '../../src/stores/store.js';
import { watchLoop } from '../helpers/lag.js';
import { commandCalls, keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

// Registered before useRedis's, so it runs first: each client closes while its server runs
// (ioredis waits 2 s for a socket that closed before `disconnect()`).
const clients: (Redis | Cluster)[] = [];
const servers: PrivateRedis[] = [];
after(async () => {
  for (const client of clients) if (client.status !== 'end') client.disconnect();
  for (const server of servers) await server.stop();
});
const redis = useRedis();
const route = 'POST/orders';
const policy = fixedWindow({ limit: 10, windowMs: 60_000, version: 'io' });

/** A connected ioredis client as sluice requires it: no offline queue, no retries of sent commands. */
async function ioredis(options: RedisOptions = {}): Promise<Redis> {
  const client = new Redis({
    host: '127.0.0.1',
    port: redis.server.port,
    ...IOREDIS_OPTIONS,
    lazyConnect: true,
    ...options,
  });
  client.on('error', () => {}); // the tests assert on the typed outcomes instead
  clients.push(client);
  await client.connect();
  return client;
}

/** `client` as `RateLimiter`'s option (recognised at construction; its type names node-redis's). */
const asClient = (client: unknown) => client as RateLimiterOptions['client'];

/** Settles `promise` to its rejection reason (fails the test when it resolves). */
const reason = (promise: Promise<unknown>) =>
  promise.then(
    (value) => assert.fail(`resolved: ${JSON.stringify(value)}`),
    (error: unknown) => error,
  );

describe('ioredis: recognised at construction', () => {
  it('a Redis is kind ioredis, a Cluster ioredis-cluster; each gets its store', () => {
    const plain = new Redis({ lazyConnect: true, ...IOREDIS_OPTIONS });
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], {
      lazyConnect: true,
      ...IOREDIS_CLUSTER_OPTIONS,
    });
    clients.push(plain, cluster);
    assert.equal(clientKind(plain), 'ioredis');
    assert.equal(clientKind(cluster), 'ioredis-cluster');
    assert.ok(storeFor(plain) instanceof IoRedisStore);
    assert.ok(storeFor(cluster) instanceof IoRedisClusterStore);
    // Typed structurally: ioredis's own classes fit without a cast.
    assert.ok(new IoRedisStore(plain) && new IoRedisClusterStore(cluster));
    // Scripts on the client itself: fewer, larger script calls than the default four in
    // flight (bench/PROFILE.md); over the connection beside it, the coalescer's default.
    assert.equal(storeFor(plain, false).pipelineDepth, 2);
    assert.equal(storeFor(plain).pipelineDepth, undefined);
    assert.equal(storeFor(cluster).pipelineDepth, 2);
  });

  it('an offline queue on (ioredis default) is an InvalidInputError saying what to set', () => {
    const cases: [Redis | Cluster, RegExp][] = [
      [new Redis({ lazyConnect: true }), /ioredis Redis created with enableOfflineQueue: false/],
      [
        new Redis({ lazyConnect: true, enableOfflineQueue: true }),
        /ioredis Redis created with enableOfflineQueue: false/,
      ],
      [
        new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true }),
        /ioredis Cluster created with enableOfflineQueue: false at the top level/,
      ],
      [
        // Only where ioredis does not read it: the Cluster's own queue is still on.
        new Cluster([{ host: '127.0.0.1', port: 1 }], {
          lazyConnect: true,
          redisOptions: { enableOfflineQueue: false } as RedisOptions,
        }),
        /ioredis Cluster created with enableOfflineQueue: false at the top level/,
      ],
      [
        new Cluster([{ host: '127.0.0.1', port: 1 }], {
          lazyConnect: true,
          enableOfflineQueue: false,
          redisOptions: { enableOfflineQueue: true } as RedisOptions,
        }),
        /without redisOptions\.enableOfflineQueue: true/,
      ],
      [
        // ioredis resends unanswered commands after a reconnect: a script could run twice.
        new Redis({ lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 }),
        /autoResendUnfulfilledCommands: false/,
      ],
      [
        new Cluster([{ host: '127.0.0.1', port: 1 }], {
          lazyConnect: true,
          enableOfflineQueue: false,
          redisOptions: { maxRetriesPerRequest: 0 },
          retryDelayOnFailover: 0,
        }),
        /redisOptions: \{ autoResendUnfulfilledCommands: false \}/,
      ],
      [
        // A lost connection's commands would never settle: in-flight slots held for good.
        new Redis({
          lazyConnect: true,
          enableOfflineQueue: false,
          autoResendUnfulfilledCommands: false,
        }),
        /maxRetriesPerRequest: 0/,
      ],
      [
        // A Cluster resends a command refused with "Connection is closed".
        new Cluster([{ host: '127.0.0.1', port: 1 }], {
          lazyConnect: true,
          enableOfflineQueue: false,
          redisOptions: { autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0 },
        }),
        /retryDelayOnFailover: 0/,
      ],
      [
        // A connection that stopped answering would keep its calls until the OS gives up.
        new Redis({
          lazyConnect: true,
          enableOfflineQueue: false,
          autoResendUnfulfilledCommands: false,
          maxRetriesPerRequest: 0,
        }),
        /socketTimeout of at least 100 ms/,
      ],
      [
        new Cluster([{ host: '127.0.0.1', port: 1 }], {
          lazyConnect: true,
          enableOfflineQueue: false,
          retryDelayOnFailover: 0,
          redisOptions: { autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0 },
        }),
        /redisOptions: \{ socketTimeout \} of at least 100 ms/,
      ],
    ];
    for (const [client, expected] of cases) {
      clients.push(client);
      assert.throws(
        () => new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(client) }),
        (error: unknown) =>
          error instanceof InvalidInputError &&
          error.field === 'options.client' &&
          expected.test(error.message),
      );
      assert.throws(
        () => new IoRedisStore(client),
        (error: unknown) => error instanceof InvalidInputError && error.field === 'client',
      );
    }
  });

  it('anything else is an InvalidInputError naming what is accepted', () => {
    for (const client of [
      {},
      { call: () => Promise.resolve() }, // no evalsha, no isCluster
      { call() {}, evalsha() {}, isCluster: 'no' },
      'redis://127.0.0.1:6379',
      null,
    ]) {
      assert.throws(
        () => new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(client) }),
        (error: unknown) =>
          error instanceof InvalidInputError &&
          error.field === 'options.client' &&
          /node-redis v6 client \(createClient\)/.test(error.message) &&
          /ioredis \(or iovalkey\) Redis or Cluster/.test(error.message) &&
          /Valkey GLIDE GlideClient/.test(error.message),
        String(client),
      );
    }
  });

  it('the core never loads ioredis: no module under src/ imports it but for types', () => {
    const files = readdirSync(new URL('../../src/', import.meta.url), {
      recursive: true,
    }).filter((file): file is string => typeof file === 'string' && file.endsWith('.ts'));
    assert.ok(files.length > 20);
    for (const file of files) {
      const text = readFileSync(new URL(`../../src/${file}`, import.meta.url), 'utf8');
      assert.doesNotMatch(
        text,
        /^\s*(import|export)(?!\s+type\b)[^;]*from\s+['"]ioredis['"]|import\(\s*['"]ioredis['"]/m,
        file,
      );
    }
  });
});

describe('ioredis Redis: decisions', () => {
  it('3 clients × 20 concurrent takes, limit 10, default batching → exactly 10 admitted, in batches', async () => {
    const admin = await redis.admin();
    const scriptCalls = async () =>
      (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
    // No denial cache here only so that its reset-epoch reads do not count below.
    const limiters = await Promise.all(
      [0, 1, 2].map(
        async () =>
          new RateLimiter({
            timeoutMs: TEST_TIMEOUT_MS,
            client: asClient(await ioredis()),
            denialCache: false,
          }),
      ),
    );
    // Load the batch script first, so that NOSCRIPT retries do not count below.
    await Promise.all([1, 2].map(() => limiters[0]?.take({ tenant: randomTenant() }, policy)));
    const tenant = randomTenant();
    const calls = await scriptCalls();
    const decisions = await Promise.all(
      limiters.flatMap((limiter) =>
        Array.from({ length: 20 }, () => limiter.take({ tenant, route }, policy)),
      ),
    );
    const admitted = decisions.filter((d) => d.allowed);
    assert.equal(admitted.length, 10);
    assert.deepEqual(
      admitted.map((d) => d.remaining).sort((a, b) => a - b),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
    // Batches of at least 4 (each its share of what the client has in flight; the cuts:
    // test/unit/coalescer.test.ts), not a call per take.
    const sent = (await scriptCalls()) - calls;
    assert.ok(sent >= 3 && sent <= 3 * (20 / 4), `${sent} script calls for 3 × 20 takes`);
    for (const limiter of limiters) {
      const stats = limiter.stats();
      assert.equal(stats.unavailable + stats.storeError + stats.timeout, 0);
    }
  });

  it('default options (denial cache on): 3 clients × 20 concurrent takes, limit 10 → exactly 10', async () => {
    // Default options but the deadline: a loaded run's first burst (NOSCRIPT, then EVAL of the
    // batch script) outlasted 150 ms; the count is under test.
    const limiters = await Promise.all(
      [0, 1, 2].map(
        async () => new RateLimiter({ client: asClient(await ioredis()), timeoutMs: 2000 }),
      ),
    );
    const tenant = randomTenant();
    const burst = () =>
      Promise.all(
        limiters.flatMap((limiter) =>
          Array.from({ length: 20 }, () => limiter.take({ tenant, route }, policy)),
        ),
      );
    assert.equal((await burst()).filter((d) => d.allowed).length, 10);
    assert.equal((await burst()).filter((d) => d.allowed).length, 0, 'the window is full');
  });

  it('takeAll is all or nothing across clients, alone and batched with takes', async () => {
    const [a, b] = await Promise.all(
      [0, 1].map(
        async () =>
          new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(await ioredis()) }),
      ),
    );
    assert.ok(a && b);
    const tenant = randomTenant();
    const wide = fixedWindow({ limit: 6, windowMs: 60_000, version: 'io' });
    const items = (r: string) => [
      { scope: { tenant }, policy: wide },
      { scope: { tenant, route: r }, policy },
    ];
    const lone = await a.takeAll(items('GET/a'));
    assert.deepEqual(
      lone.decisions.map((d) => [d.allowed, d.remaining]),
      [
        [true, 5],
        [true, 9],
      ],
    );
    const results = await Promise.all([
      ...Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).takeAll(items(`GET/${i % 3}`))),
      b.take({ tenant, route: 'GET/x' }, policy),
    ]);
    const all = results.slice(0, 8) as Awaited<ReturnType<RateLimiter['takeAll']>>[];
    assert.equal(all.filter((r) => r.allowed).length, 5, 'the tenant-wide limit of 6 binds');
    for (const r of all) assert.ok(r.decisions.every((d) => d.allowed === r.allowed));
    assert.equal((await a.peek({ tenant }, wide)).remaining, 0);
    // GET/x: one lone take of 10, 9 left.
    assert.equal((await a.peek({ tenant, route: 'GET/x' }, policy)).remaining, 9);
  });

  it('NOSCRIPT after SCRIPT FLUSH is reloaded with EVAL, alone and batched, never a failure', async () => {
    const admin = await redis.admin();
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: asClient(await ioredis()),
    });
    const tenant = randomTenant();
    assert.equal((await limiter.take({ tenant, route }, policy)).remaining, 9);
    await admin.client.scriptFlush();
    assert.equal((await limiter.take({ tenant, route }, policy)).remaining, 8, 'alone');
    await admin.client.scriptFlush();
    const burst = await Promise.all(
      Array.from({ length: 5 }, () => limiter.take({ tenant, route }, policy)),
    );
    assert.deepEqual(burst.map((d) => d.remaining).sort(), [3, 4, 5, 6, 7], 'batched');
    assert.equal(limiter.stats().unavailable + limiter.stats().storeError, 0);
  });

  it('a key of the wrong type is the same StoreError (WRONGTYPE) alone and batched', async () => {
    const admin = await redis.admin();
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: asClient(await ioredis()),
      denialCache: false,
    });
    const bad = randomTenant();
    await admin.client.hSet(keyFor(policy, bad, route), 'x', '1');
    try {
      const alone = await reason(limiter.take({ tenant: bad, route }, policy));
      const batched = await Promise.allSettled([
        limiter.take({ tenant: randomTenant(), route }, policy),
        limiter.take({ tenant: bad, route }, policy),
      ]);
      assert.equal(batched[0]?.status, 'fulfilled', 'its neighbour is decided');
      const inBatch = (batched[1] as PromiseRejectedResult).reason;
      for (const error of [alone, inBatch]) {
        assert.ok(error instanceof StoreError && error.redisCode === 'WRONGTYPE', String(error));
      }
    } finally {
      await admin.client.del(keyFor(policy, bad, route));
    }
  });
});

describe('ioredis Redis: failures', () => {
  it('a disconnected or quit client is an UnavailableError at once, alone and batched (not a hang)', async () => {
    for (const close of [(c: Redis) => c.disconnect(), (c: Redis) => c.quit()]) {
      const client = await ioredis();
      const limiter = new RateLimiter({ client: asClient(client), timeoutMs: 1000 });
      await close(client);
      const lag = watchLoop();
      const started = performance.now();
      const errors = await Promise.all([
        reason(limiter.take({ tenant: randomTenant(), route }, policy)),
        ...[1, 2].map(() => reason(limiter.take({ tenant: randomTenant(), route }, policy))),
      ]);
      const elapsed = performance.now() - started;
      for (const error of errors) {
        assert.ok(error instanceof UnavailableError, String(error));
        assert.match((error as Error).message, /Connection is closed|Stream isn't writeable/);
      }
      const lagMs = lag.stop();
      assert.ok(
        elapsed < 200 + lagMs,
        `answered in ${elapsed.toFixed(0)} ms (loop late ≤ ${lagMs} ms)`,
      );
    }
  });

  it('a stopped server: the take in flight and every later one are UnavailableError within the deadline; a restarted one serves again', async () => {
    const server = await startRedisServer();
    servers.push(server);
    const client = await ioredis({ port: server.port });
    // The client's own failure path (with the script connection beside it: beside-client.test.ts).
    const limiter = new RateLimiter({
      client: asClient(client),
      timeoutMs: 1000,
      scriptConnection: false,
    });
    const tenant = randomTenant();
    assert.equal((await limiter.take({ tenant, route }, policy)).allowed, true);
    const pause = await ioredis({ port: server.port });
    await pause.call('CLIENT', ['PAUSE', '5000', 'WRITE']);
    const inFlight = reason(limiter.take({ tenant, route }, policy));
    await new Promise((resolve) => setTimeout(resolve, 30)); // sent, held by the pause
    const lag = watchLoop();
    const started = performance.now();
    await server.kill();
    const lost = await inFlight;
    const later = await reason(limiter.take({ tenant, route }, policy));
    const elapsed = performance.now() - started;
    // maxRetriesPerRequest: 0 — the command sent is rejected when its connection closes,
    // never held for a reconnection and sent again.
    assert.ok(lost instanceof UnavailableError, String(lost));
    assert.match(lost.message, /max retries per request/);
    // No offline queue: nothing waits for the reconnection.
    assert.ok(later instanceof UnavailableError, String(later));
    assert.match(later.message, /enableOfflineQueue/);
    const lagMs = lag.stop();
    assert.ok(
      elapsed < 500 + lagMs,
      `answered in ${elapsed.toFixed(0)} ms (loop late ≤ ${lagMs} ms)`,
    );
    assert.equal(limiter.stats().inFlight, 0);
    // The client reconnects on its own (ioredis's retryStrategy) and the limiter decides again.
    await server.restart();
    const deadline = Date.now() + 5000;
    while ((client.status !== 'ready' || pause.status !== 'ready') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal((await limiter.take({ tenant, route }, policy)).remaining, 9, 'a fresh server');
  });

  it('a replica (READONLY) is the same UnavailableError alone and batched', async () => {
    const replica = await startRedisServer(['--replicaof', '127.0.0.1', String(redis.server.port)]);
    servers.push(replica);
    const client = await ioredis({ port: replica.port });
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: asClient(client),
      onWarning: () => {},
    });
    const alone = await reason(limiter.take({ tenant: randomTenant() }, policy));
    const batched = await Promise.allSettled([
      limiter.take({ tenant: randomTenant() }, policy),
      limiter.take({ tenant: randomTenant() }, policy),
      limiter.takeAll([
        { scope: { tenant: 'd' }, policy },
        { scope: { tenant: 'd', route: 'r' }, policy },
      ]),
    ]);
    for (const error of [alone, ...batched.map((r) => (r as PromiseRejectedResult).reason)]) {
      assert.ok(error instanceof UnavailableError, String(error));
      assert.match((error as Error).message, /^Redis is not serving: READONLY/);
    }
  });
});

describe('ioredis Cluster store (a stand-in for the client)', () => {
  /**
   * A Cluster's surface: its slot map (keys `a` and `b` on primary 127.0.0.1:7001), its one
   * primary's client, and `call` (the cluster's and the primary's) answered by `answer`.
   */
  function standIn(answer: (command: string, args: string[]) => Promise<unknown>) {
    const sent: string[][] = [];
    const call = (command: string, args: string[]) => {
      sent.push([command, ...args]);
      return answer(command, args);
    };
    const slots: (string[] | undefined)[] = [];
    for (const key of ['a', 'b']) slots[calculateSlot(key)] = ['127.0.0.1:7001'];
    const primary = { options: { host: '127.0.0.1', port: 7001 }, call };
    const cluster: IoRedisClusterLike & { evalsha(): void } = {
      isCluster: true,
      options: {
        enableOfflineQueue: false,
        retryDelayOnFailover: 0,
        redisOptions: IOREDIS_CLUSTER_OPTIONS.redisOptions,
      },
      slots,
      nodes: () => [primary as never],
      evalsha() {},
      call,
    };
    return { cluster, sent };
  }

  it('groupOf is the primary serving the key’s slot, per the slot map (keyPrefix included)', () => {
    const { cluster } = standIn(() => Promise.resolve(null));
    const slots: (string[] | undefined)[] = [];
    slots[calculateSlot('a')] = ['127.0.0.1:7001', '127.0.0.1:7004'];
    slots[calculateSlot('p:a')] = ['127.0.0.1:7002', '127.0.0.1:7005'];
    const store = new IoRedisClusterStore({ ...cluster, slots });
    assert.equal(store.groupOf('a'), '127.0.0.1:7001');
    assert.equal(store.groupOf('b'), `slot ${calculateSlot('b')}`, 'no slot map yet');
    const prefixed = new IoRedisClusterStore({
      ...cluster,
      slots,
      options: {
        enableOfflineQueue: false,
        keyPrefix: 'p:',
        retryDelayOnFailover: 0,
        redisOptions: IOREDIS_CLUSTER_OPTIONS.redisOptions,
      },
    });
    assert.equal(prefixed.groupOf('a'), '127.0.0.1:7002');
  });

  it('a batch over several slots goes as the cross-slot script; a redirection is a RerouteError', async () => {
    const gaveUp = new Error(
      'Too many Cluster redirections. Last error: ReplyError: MOVED 3300 127.0.0.1:7002',
    );
    const replies: Record<string, Error> = {
      'MOVED 3300 127.0.0.1:7002': Object.assign(new Error('MOVED 3300 127.0.0.1:7002'), {
        name: 'ReplyError',
      }),
      gaveUp,
      closed: new Error('Connection is closed.'),
    };
    for (const [what, failure] of Object.entries(replies)) {
      const { cluster, sent } = standIn(() => Promise.reject(failure));
      const store = new IoRedisClusterStore(cluster);
      const error = await reason(store.evalScript(batchScript, ['a', 'b'], ['t', '1']));
      // No declared keys (Redis would refuse them with CROSSSLOT): key count and keys in ARGV.
      assert.deepEqual(sent[0], [
        'EVALSHA',
        crossSlotBatchScript.sha1,
        '0',
        '2',
        'a',
        'b',
        't',
        '1',
      ]);
      if (what === 'closed') {
        assert.ok(error instanceof UnavailableError, `${what}: ${String(error)}`);
      } else {
        assert.ok(error instanceof RerouteError, `${what}: ${String(error)}`);
      }
      // One slot: the ordinary batch script; a redirection then is no reroute (nothing to split).
      const single = await reason(store.evalScript(batchScript, ['{a}1', '{a}2'], ['t', '1']));
      assert.equal(sent[1]?.[1], batchScript.sha1);
      assert.ok(single instanceof UnavailableError, `${what}, one slot: ${String(single)}`);
    }
  });

  it('a batch over several slots whose primary the client does not list yet is a RerouteError, nothing sent', async () => {
    const { cluster, sent } = standIn(() => Promise.resolve([]));
    // The slot map names 127.0.0.1:7001; the client lists no primary (it is still refreshing).
    const store = new IoRedisClusterStore({ ...cluster, nodes: () => [] });
    const error = await reason(store.evalScript(batchScript, ['a', 'b'], ['t', '1']));
    // Not mapped to an UnavailableError on the way (which failed every request of the batch):
    // the coalescer sends each request again, alone, routed by ioredis.
    assert.ok(error instanceof RerouteError, String(error));
    assert.match((error as RerouteError).failure.message, /no cluster node 127\.0\.0\.1:7001/);
    assert.deepEqual(sent, []);
  });

  it('NOSCRIPT, also as the last error of a Cluster that gave up, is reloaded with EVAL', async () => {
    for (const noScript of [
      Object.assign(new Error('NOSCRIPT No matching script.'), { name: 'ReplyError' }),
      new Error('Too many Cluster redirections. Last error: ReplyError: NOSCRIPT No matching'),
    ]) {
      const { cluster, sent } = standIn((command) =>
        command === 'EVALSHA' ? Promise.reject(noScript) : Promise.resolve([1, 9, 0, 0]),
      );
      const store = new IoRedisClusterStore(cluster);
      assert.deepEqual(await store.evalScript(batchScript, ['{a}1'], ['t', '1']), [1, 9, 0, 0]);
      assert.deepEqual(
        sent.map((c) => c[0]),
        ['EVALSHA', 'EVAL'],
      );
      assert.equal(sent[1]?.[1], batchScript.source);
    }
  });
});
