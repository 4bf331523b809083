/**
 * Valkey GLIDE clients (`GlideClient`, `GlideClusterClient`) given as
 * `new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client })`, on a private Redis 7.0: recognised at construction (a cluster
 * client with its recovery queue on refused), exact counts across clients, takeAll, NOSCRIPT
 * recovery, and every failure typed — a wrong password a `RedisConfigError`, a WRONGTYPE key
 * a `StoreError` (alone and batched), a stopped server or a closed client an
 * `UnavailableError`; a call whose connection dropped after it was sent runs once. The
 * cluster client runs on a real cluster in the cluster suite.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { GlideClient, GlideClusterClient, Logger } from '@valkey/valkey-glide';
import {
  fixedWindow,
  InvalidInputError,
  RateLimiter,
  type RateLimiterOptions,
  RedisConfigError,
  StoreError,
  TimeoutError,
  UnavailableError,
} from 'sluice';
import { GLIDE_CLUSTER_OPTIONS, GLIDE_OPTIONS } from 'sluice/valkey-glide';
import { startRedisServer } from '../../src/demo/redis-server.js';
import { startTcpProxy, type TcpProxy } from '../../src/demo/tcp-proxy.js';
import { clientKind, storeFor } from '../../src/redis/select.js';
import { glideReplyText, toSluiceError } from '../../src/redis/valkey-glide/stores.js';
import { keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

// GLIDE's core logs every error reply at WARN on stdout; the tests assert on outcomes.
Logger.setLoggerConfig('off');

// Registered before useRedis's: each client closes while its server runs.
const closers: (() => unknown)[] = [];
after(async () => {
  for (const close of closers) await close();
});
const redis = useRedis();
const route = 'POST/orders';
const policy = fixedWindow({ limit: 10, windowMs: 60_000, version: 'glide' });

/** A connected GLIDE client created as docs/redis.md says, closed after the file. */
async function glide(port = redis.server.port, extra: object = {}): Promise<GlideClient> {
  const client = await GlideClient.createClient({
    addresses: [{ host: '127.0.0.1', port }],
    ...GLIDE_OPTIONS,
    ...extra,
  });
  closers.push(() => client.close());
  return client;
}

/** `client` as `RateLimiter`'s option (recognised at construction). */
const asClient = (client: unknown) => client as RateLimiterOptions['client'];

/** Settles `promise` to its rejection reason (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => assert.fail(`resolved with ${JSON.stringify(value)}`),
    (error: unknown) => error,
  );
}

describe('Valkey GLIDE GlideClient', () => {
  it('is recognised by its shape, as GLIDE (not as a node-redis client)', async () => {
    const client = await glide();
    assert.equal(clientKind(client), 'valkey-glide');
    assert.equal(storeFor(client).cluster, false);
  });

  it('3 clients × 10 concurrent takes, limit 10 → exactly 10, remaining 9…0 once each', async () => {
    const limiters = await Promise.all(
      [0, 1, 2].map(
        async () =>
          new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(await glide()) }),
      ),
    );
    const tenant = randomTenant();
    const decisions = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        (limiters[i % 3] as RateLimiter).take({ tenant, route }, policy),
      ),
    );
    const admitted = decisions.filter((d) => d.allowed);
    assert.deepEqual(
      admitted.map((d) => d.remaining).sort((a, b) => a - b),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
  });

  it('SCRIPT FLUSH: the next takes reload the script (NOSCRIPT never reaches a caller)', async () => {
    const client = await glide();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(client) });
    const scope = { tenant: randomTenant(), route };
    assert.equal((await limiter.take(scope, policy)).remaining, 9);
    await client.customCommand(['SCRIPT', 'FLUSH']);
    const decisions = await Promise.all([1, 2, 3].map(() => limiter.take(scope, policy)));
    assert.deepEqual(decisions.map((d) => d.remaining).sort(), [6, 7, 8]);
  });

  it('a WRONGTYPE key is a StoreError, alone and batched with a take of another scope', async () => {
    const client = await glide();
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: asClient(client),
      denialCache: false,
    });
    const tenant = randomTenant();
    await client.customCommand(['LPUSH', keyFor(policy, tenant, route), 'x']);
    const alone = await rejection(limiter.take({ tenant, route }, policy));
    assert.ok(alone instanceof StoreError, String(alone));
    assert.equal(alone.redisCode, 'WRONGTYPE');
    const [bad, good] = await Promise.allSettled([
      limiter.take({ tenant, route }, policy),
      limiter.take({ tenant: randomTenant(), route }, policy),
    ]);
    assert.ok(bad.status === 'rejected' && bad.reason instanceof StoreError, String(bad));
    assert.equal(bad.reason.redisCode, 'WRONGTYPE');
    assert.ok(good.status === 'fulfilled' && good.value.allowed);
  });

  it('a wrong password (an ACL user the server lacks) is RedisConfigError wrong-password, not an outage', async () => {
    const client = await glide(redis.server.port, {
      credentials: { username: 'ghost', password: 'x' },
      lazyConnect: true,
    });
    const limiter = new RateLimiter({ client: asClient(client), timeoutMs: 3000 });
    const error = await rejection(limiter.take({ tenant: randomTenant() }, policy));
    assert.ok(error instanceof RedisConfigError, String(error));
    assert.equal(error.reason, 'wrong-password');
    assert.equal(limiter.stats().configError, 1);
  });

  it('a password required and none given is RedisConfigError auth-required', async () => {
    const locked = await startRedisServer(['--requirepass', 'sekret']);
    closers.push(() => locked.stop());
    const client = await glide(locked.port, { lazyConnect: true });
    const limiter = new RateLimiter({ client: asClient(client), timeoutMs: 3000 });
    const error = await rejection(limiter.take({ tenant: randomTenant() }, policy));
    assert.ok(error instanceof RedisConfigError, String(error));
    assert.equal(error.reason, 'auth-required');
  });

  it('a stopped server is an UnavailableError; a closed client too (never allowed)', async () => {
    const server = await startRedisServer();
    closers.push(() => server.stop());
    const client = await glide(server.port, { requestTimeout: 300 });
    const limiter = new RateLimiter({ client: asClient(client), timeoutMs: 1000 });
    const scope = { tenant: randomTenant() };
    assert.equal((await limiter.take(scope, policy)).allowed, true);
    await server.kill();
    const down = await rejection(limiter.take(scope, policy));
    assert.ok(down instanceof UnavailableError, String(down));
    client.close();
    const closed = await rejection(limiter.take(scope, policy));
    assert.ok(closed instanceof UnavailableError, String(closed));
    assert.match(closed.message, /closed/);
  });

  it('a take whose connection drops after it was sent fails typed and is counted once (GLIDE sends it once)', async () => {
    const proxy: TcpProxy = await startTcpProxy('127.0.0.1', redis.server.port);
    closers.push(() => proxy.close());
    const client = await glide(proxy.port, { requestTimeout: 2000 });
    const limiter = new RateLimiter({ client: asClient(client), timeoutMs: 2000 });
    const scope = { tenant: randomTenant(), route };
    assert.equal((await limiter.take(scope, policy)).remaining, 9);
    proxy.mode = 'cut-after-send';
    const cut = await rejection(limiter.take(scope, policy));
    // Unavailable once GLIDE sees the cut; a TimeoutError when the deadline passes first (a
    // busy CI machine): both typed, neither a decision.
    assert.ok(cut instanceof UnavailableError || cut instanceof TimeoutError, String(cut));
    proxy.mode = 'pass';
    const admin = await redis.admin();
    const key = keyFor(policy, scope.tenant, route);
    // The cut take ran at most once: whether its bytes reached Redis before the cut is a race
    // (1 or 2 counted), but never 3 — and nothing is sent again once GLIDE reconnects.
    const counted = Number(await admin.client.get(key));
    assert.ok(counted === 1 || counted === 2, `counted ${counted}`);
    const next = await limiter.take(scope, policy);
    assert.equal(next.remaining, policy.limit - counted - 1);
    assert.equal(Number(await admin.client.get(key)), counted + 1, 'no resend after the reconnect');
  });
});

describe('Valkey GLIDE GlideClusterClient recognition', () => {
  // A standalone server: createClient of a cluster client needs a cluster, so these are
  // the client's shape with its configuration as GLIDE keeps it (the cluster suite runs a
  // real one).
  const clusterShaped = (config: object) =>
    Object.assign(Object.create(GlideClusterClient.prototype), { config });

  it('a cluster client is recognised by its shape (invokeScriptWithRoute)', () => {
    const client = clusterShaped({ ...GLIDE_CLUSTER_OPTIONS, addresses: [] });
    assert.equal(clientKind(client), 'valkey-glide-cluster');
    assert.equal(storeFor(client).cluster, true);
  });

  it('a cluster client without recoveryRequestsQueueSize: 0 is refused, naming it', () => {
    for (const config of [{ addresses: [] }, { addresses: [], recoveryRequestsQueueSize: 10 }]) {
      assert.throws(
        () =>
          new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(clusterShaped(config)) }),
        (error: unknown) =>
          error instanceof InvalidInputError &&
          error.field === 'options.client' &&
          /recoveryRequestsQueueSize: 0/.test(error.message),
      );
    }
  });
});

describe('GLIDE errors', () => {
  /** An error of GLIDE's class `name`, as its core words them. */
  const glideError = (name: string, message: string): Error => {
    const Class = { [name]: class extends Error {} }[name] as new (m: string) => Error;
    return new Class(message);
  };

  it('error replies read back as Redis wrote them, every other failure is not a reply', () => {
    const cases: [string, string, string | undefined][] = [
      ['RequestError', 'WRONGTYPE: Operation against a key', 'WRONGTYPE Operation against a key'],
      [
        'RequestError',
        'An error was signalled by the server: - NoScriptError: No matching script.',
        'NOSCRIPT No matching script.',
      ],
      [
        'RequestError',
        'An error was signalled by the server: - ReadOnly: You can’t write',
        'READONLY You can’t write',
      ],
      [
        'RequestError',
        'An error was signalled by the server: - ResponseError: The user executing the script can’t run',
        'ERR The user executing the script can’t run',
      ],
      [
        'ExecAbortError',
        'An error was signalled by the server: - ExecAbortError: x',
        'EXECABORT x',
      ],
      ['ConnectionError', 'Received connection error `channel closed`', undefined],
      ['TimeoutError', 'timed out', undefined],
      ['ClosingError', 'the client is closed', undefined],
      ['RequestError', 'Client internal error - ClientError: x', undefined],
    ];
    for (const [name, message, reply] of cases) {
      assert.equal(glideReplyText(glideError(name, message)), reply, message);
    }
  });

  it('maps to sluice errors: READONLY and timeouts unavailable, OOM a StoreError, NOPERM a RedisConfigError', () => {
    const signalled = (kind: string, text: string) =>
      glideError('RequestError', `An error was signalled by the server: - ${kind}: ${text}`);
    assert.ok(toSluiceError(signalled('ReadOnly', 'x')) instanceof UnavailableError);
    assert.ok(toSluiceError(glideError('TimeoutError', 'timed out')) instanceof UnavailableError);
    const oom = toSluiceError(glideError('RequestError', 'OOM: command not allowed'));
    assert.ok(oom instanceof StoreError && oom.redisCode === 'OOM');
    const noperm = toSluiceError(signalled('PermissionDenied', 'no permissions'));
    assert.ok(noperm instanceof RedisConfigError && noperm.reason === 'no-permission');
    const refused = toSluiceError(
      glideError(
        'ClosingError',
        'Connection error: Standalone(Received error for address `h:1`: WRONGPASS: invalid username-password pair\n)',
      ),
    );
    assert.ok(refused instanceof RedisConfigError && refused.reason === 'wrong-password');
  });
});
