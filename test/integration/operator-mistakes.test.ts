/**
 * What operators and typos do to a running limiter: a password rotated on the server, an
 * ACL permission withdrawn, a reconnect hook that throws, rotating credentials, a Unix
 * socket. A configuration mistake is a `RedisConfigError` whenever it happens — counted apart
 * from outages — and a throwing hook is a warning, never a stopped reconnect.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import {
  type Decision,
  fixedWindow,
  isSluiceError,
  RateLimiter,
  type RateLimiterOptions,
  RedisConfigError,
  type Scope,
} from 'sluice';
import { IOREDIS_OPTIONS } from 'sluice/ioredis';
import { connectRedis, type RedisConnection } from 'sluice/node-redis';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { randomTenant, TEST_TIMEOUT_MS } from '../helpers/redis.js';

const servers: PrivateRedis[] = [];
const closers: (() => unknown)[] = [];
const dir = mkdtempSync(join(tmpdir(), 'sluice-mistakes-'));
after(async () => {
  for (const close of closers) await Promise.resolve(close()).catch(() => {});
  for (const server of servers) await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

const policy = fixedWindow({ limit: 1_000_000, windowMs: 60_000 });

async function server(args: string[] = []): Promise<PrivateRedis> {
  const s = await startRedisServer(args);
  servers.push(s);
  return s;
}

async function admin(url: string, password?: string): Promise<RedisConnection> {
  const c = await connectRedis({
    url,
    fastPath: false,
    stallTimeoutMs: 0,
    reconnect: true,
    onError: () => {},
    ...(password === undefined ? {} : { password }),
  });
  closers.push(() => c.destroy());
  return c;
}

/** `allowed`, or the error's code and, for a RedisConfigError, its reason. */
async function outcome(limiter: RateLimiter): Promise<string> {
  return outcomeOf(limiter.take({ tenant: randomTenant() }, policy));
}

/** What a decision promise came to: as {@link outcome}. */
async function outcomeOf(decision: Promise<Decision>): Promise<string> {
  return decision.then(
    (d) => (d.allowed ? 'allowed' : 'limited'),
    (error: unknown) =>
      error instanceof RedisConfigError
        ? `config:${error.reason}`
        : isSluiceError(error)
          ? error.code
          : `untyped: ${String(error)}`,
  );
}

/** Takes until one gives `expected` (or 10 s pass); resolves every outcome seen. */
async function until(limiter: RateLimiter, expected: string): Promise<string[]> {
  const seen: string[] = [];
  const started = performance.now();
  while (performance.now() - started < 10_000) {
    const o = await outcome(limiter);
    seen.push(o);
    if (o === expected) return seen;
    await sleep(25);
  }
  assert.fail(`no ${expected} within 10 s: ${[...new Set(seen)].join(', ')}`);
}

describe('a password rotated on the server after start', () => {
  it('connectRedis: every call is RedisConfigError wrong-password (never UnavailableError for long), counted apart; fixed, it decides again', async () => {
    const s = await server(['--requirepass', 'old']);
    const root = await admin(s.url, 'old');
    const errors: Error[] = [];
    const redis = await connectRedis({
      url: s.url,
      password: 'old',
      onError: (error) => errors.push(error),
    });
    closers.push(() => redis.destroy());
    const limiter = new RateLimiter({ client: redis, timeoutMs: 500 });
    assert.equal(await outcome(limiter), 'allowed');
    await root.client.sendCommand(['CONFIG', 'SET', 'requirepass', 'new']);
    await root.client.sendCommand(['AUTH', 'new']);
    await root.client.sendCommand(['CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes']);
    const seen = await until(limiter, 'config:wrong-password');
    // Between the kill and the first refused reconnect, calls may find no connection.
    assert.ok(
      seen.every((o) => ['SLUICE_UNAVAILABLE', 'config:wrong-password'].includes(o)),
      seen.join(),
    );
    assert.equal(await outcome(limiter), 'config:wrong-password');
    assert.ok(limiter.stats().configError >= 2);
    assert.ok(
      errors.some((e) => /WRONGPASS/.test(e.message)),
      'onError heard the refusal',
    );
    await root.client.sendCommand(['CONFIG', 'SET', 'requirepass', 'old']);
    await until(limiter, 'allowed');
  });
});

describe('an ioredis client whose handshake Redis refuses', () => {
  // ioredis tells only its `error` event why it is not ready; every command fails with
  // "Stream isn't writeable", which alone read as an outage (and a fail-open route admitted).
  it('a wrong password from the start: RedisConfigError wrong-password, counted apart; the application still hears the error', async () => {
    const s = await server(['--requirepass', 'right']);
    const heard: string[] = [];
    const c = new Redis({ port: s.port, password: 'wrong', ...IOREDIS_OPTIONS });
    c.on('error', (error: Error) => heard.push(error.message));
    closers.push(() => c.disconnect());
    const limiter = new RateLimiter({ client: c, timeoutMs: 500 });
    await until(limiter, 'config:wrong-password');
    assert.equal(await outcome(limiter), 'config:wrong-password');
    assert.ok(limiter.stats().configError >= 2);
    assert.ok(
      heard.some((m) => /WRONGPASS/.test(m)),
      'the application’s listener heard it',
    );
  });

  it('a password rotated on the server: RedisConfigError once the reconnect is refused; fixed, it decides again', async () => {
    const s = await server(['--requirepass', 'old']);
    const root = await admin(s.url, 'old');
    const c = new Redis({ port: s.port, password: 'old', ...IOREDIS_OPTIONS });
    c.on('error', () => {});
    closers.push(() => c.disconnect());
    await new Promise((resolve) => c.once('ready', resolve));
    const limiter = new RateLimiter({ client: c, timeoutMs: 500 });
    assert.equal(await outcome(limiter), 'allowed');
    await root.client.sendCommand(['CONFIG', 'SET', 'requirepass', 'new']);
    await root.client.sendCommand(['AUTH', 'new']);
    await root.client.sendCommand(['CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes']);
    const seen = await until(limiter, 'config:wrong-password');
    assert.ok(
      seen.every((o) => ['SLUICE_UNAVAILABLE', 'config:wrong-password'].includes(o)),
      seen.join(),
    );
    await root.client.sendCommand(['CONFIG', 'SET', 'requirepass', 'old']);
    await until(limiter, 'allowed');
    // Answered again: a later outage is an outage, not the refusal of before.
    await s.kill();
    assert.equal(await outcome(limiter), 'SLUICE_UNAVAILABLE');
  });

  it('with no error listener of its own, ioredis’s "Unhandled error event" line is still printed', async () => {
    const s = await server(['--requirepass', 'right']);
    const printed: string[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => printed.push(args.map(String).join(' '));
    try {
      const c = new Redis({ port: s.port, password: 'wrong', ...IOREDIS_OPTIONS });
      closers.push(() => c.disconnect());
      const limiter = new RateLimiter({ client: c, timeoutMs: 500 });
      await until(limiter, 'config:wrong-password');
    } finally {
      console.error = original;
    }
    assert.ok(
      printed.some((line) => /^\[ioredis\] Unhandled error event: .*WRONGPASS/s.test(line)),
      printed.join('\n'),
    );
  });
});

describe('a node-redis client of your own whose handshake Redis refuses', () => {
  // node-redis too tells only its `error` event why; its calls fail with "The client is
  // offline", which alone read as an outage (and a fail-open route admitted).
  for (const [label, extra] of [
    ['reconnecting', {}],
    ['with no reconnect strategy', { reconnectStrategy: false as const }],
  ] as const) {
    it(`a wrong password, connect() not awaited, ${label}: RedisConfigError wrong-password at once, ready() rejects with it`, async () => {
      const s = await server(['--requirepass', 'right']);
      const heard: string[] = [];
      const c = createClient({
        socket: { port: s.port, host: '127.0.0.1', ...extra },
        password: 'wrong',
        disableOfflineQueue: true,
      });
      c.on('error', (error: Error) => heard.push(error.message));
      c.connect().catch(() => {});
      closers.push(() => c.destroy());
      const limiter = new RateLimiter({ client: c, timeoutMs: 500 });
      const started = performance.now();
      await until(limiter, 'config:wrong-password');
      await assert.rejects(
        limiter.ready(),
        (error: unknown) => error instanceof RedisConfigError && error.reason === 'wrong-password',
      );
      const ms = performance.now() - started;
      assert.ok(ms < 5_000, `found in ${ms.toFixed(0)} ms`);
      assert.ok(
        heard.some((m) => /WRONGPASS/.test(m)),
        'the application’s listener heard it',
      );
    });
  }
});

describe('a permission withdrawn from the ACL user of a running connection', () => {
  // `-@all`: the scripts themselves are refused (NOPERM). `-pttl`: only a command the scripts
  // run, which Redis 7.0 refuses inside the script with "ERR The user executing the script
  // can't run this command" (it was a StoreError, and a fail-open route let traffic through).
  const withdrawals = [['-@all'], ['-pttl']] as const;
  for (const [kind, withdrawn] of (
    ['connectRedis', 'node-redis client of your own', 'ioredis'] as const
  ).flatMap((k) => withdrawals.map((w) => [k, w] as const))) {
    it(`${kind}, ACL ${withdrawn.join(' ')}: RedisConfigError no-permission, alone, batched, peeked`, async () => {
      const s = await server();
      const root = await admin(s.url);
      await root.client.sendCommand(['ACL', 'SETUSER', 'app', 'on', '>pw', '~*', '+@all']);
      let client: unknown;
      if (kind === 'connectRedis') {
        const c = await connectRedis({
          url: s.url,
          username: 'app',
          password: 'pw',
          onError: () => {},
        });
        closers.push(() => c.destroy());
        client = c;
      } else if (kind === 'ioredis') {
        const c = new Redis({ port: s.port, username: 'app', password: 'pw', ...IOREDIS_OPTIONS });
        c.on('error', () => {});
        closers.push(() => c.disconnect());
        await new Promise((resolve) => c.once('ready', resolve));
        client = c;
      } else {
        const c = createClient({
          url: s.url,
          username: 'app',
          password: 'pw',
          disableOfflineQueue: true,
        });
        c.on('error', () => {});
        closers.push(() => c.destroy());
        await c.connect();
        client = c;
      }
      // A deadline far above a loaded machine's latency: the refusal's type is under test.
      const limiter = new RateLimiter({
        client: client as RateLimiterOptions['client'],
        denialCache: false,
        timeoutMs: 2000,
      });
      // Scopes whose counters exist, so that every take and peek reaches PTTL.
      const scopes = Array.from({ length: 9 }, () => ({ tenant: randomTenant() }));
      for (const scope of scopes) assert.equal((await limiter.take(scope, policy)).allowed, true);
      await root.client.sendCommand(['ACL', 'SETUSER', 'app', ...withdrawn]);
      const [first, ...rest] = scopes as [Scope, ...Scope[]];
      assert.equal(await outcomeOf(limiter.take(first, policy)), 'config:no-permission', 'alone');
      const batched = await Promise.all(
        rest.map((scope) => outcomeOf(limiter.take(scope, policy))),
      );
      assert.deepEqual([...new Set(batched)], ['config:no-permission'], 'batched');
      assert.equal(await outcomeOf(limiter.peek(first, policy)), 'config:no-permission', 'peek');
      assert.equal(limiter.stats().unavailable, 0);
      assert.equal(limiter.stats().storeError, 0);
    });
  }
});

describe('hooks a connection calls', () => {
  it('an onReconnect that throws is a warning: the connection reconnects and decisions resume', async () => {
    const s = await server();
    const root = await admin(s.url);
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      let calls = 0;
      const redis = await connectRedis({
        url: s.url,
        onError: () => {},
        onReconnect: () => {
          calls++;
          throw new Error('reconnect hook bug');
        },
      });
      closers.push(() => redis.destroy());
      const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: redis });
      assert.equal(await outcome(limiter), 'allowed');
      await root.client.sendCommand(['CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes']);
      await until(limiter, 'allowed');
      await sleep(50);
      assert.ok(calls >= 1, 'the hook was called');
      assert.ok(redis.isReady);
      assert.ok(
        warnings.some((w) => w.includes('reconnect hook bug')),
        warnings.join('\n'),
      );
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('credentials as a function: asked for on every handshake, so a rotated password is picked up on reconnect', async () => {
    const s = await server(['--requirepass', 'one']);
    const root = await admin(s.url, 'one');
    let password = 'one';
    let asked = 0;
    const redis = await connectRedis({
      url: s.url,
      onError: () => {},
      credentials: () => {
        asked++;
        return { password };
      },
    });
    closers.push(() => redis.destroy());
    assert.equal(asked, 2, 'once per connection (node-redis and the script connection)');
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: redis });
    assert.equal(await outcome(limiter), 'allowed');
    password = 'two';
    await root.client.sendCommand(['CONFIG', 'SET', 'requirepass', 'two']);
    await root.client.sendCommand(['AUTH', 'two']);
    await root.client.sendCommand(['CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes']);
    await until(limiter, 'allowed');
    assert.ok(asked >= 4);
  });
});

describe('connectRedis over a Unix socket', () => {
  it('unix:///path: both connections use the socket', async () => {
    const socket = join(dir, 'redis.sock');
    const s = await server(['--unixsocket', socket, '--unixsocketperm', '700']);
    const redis = await connectRedis({ url: `unix://${socket}`, onError: () => {} });
    closers.push(() => redis.destroy());
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: redis });
    assert.equal(await outcome(limiter), 'allowed');
    const root = await admin(s.url);
    const clients = String(await root.client.sendCommand(['CLIENT', 'LIST']));
    const overSocket = clients
      .split('\n')
      .filter((line) => /addr=\/|addr=unix|laddr=.*sock/.test(line) || /flags=U/.test(line));
    assert.ok(overSocket.length >= 2, `two connections over the socket:\n${clients}`);
  });
});

describe('over HTTP, a refused configuration is not an outage', () => {
  it('fail-open and fail-closed routes pass RedisConfigError to the error handling (500), never admit it as fail-open', async () => {
    const s = await server();
    const root = await admin(s.url);
    await root.client.sendCommand(['ACL', 'SETUSER', 'web', 'on', '>pw', '~*', '+@all']);
    const redis = await connectRedis({
      url: s.url,
      username: 'web',
      password: 'pw',
      onError: () => {},
    });
    closers.push(() => redis.destroy());
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: redis });
    const { withRateLimit } = await import('sluice/node');
    const { createServer } = await import('node:http');
    let handled = 0;
    const errors: unknown[] = [];
    const serve = (failureMode: 'fail-open' | 'fail-closed') =>
      withRateLimit(
        {
          limiter,
          policy,
          route: `GET/${failureMode}`,
          identify: () => 't',
          failureMode,
          ...(failureMode === 'fail-open' ? { failOpenLimit: 100 } : {}),
          onError: (error) => errors.push(error),
        },
        (_req, res) => {
          handled++;
          res.end('ok');
        },
      );
    const open = serve('fail-open');
    const closed = serve('fail-closed');
    const http = createServer((req, res) =>
      req.url === '/open' ? open(req, res) : closed(req, res),
    );
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise((resolve) => http.close(resolve)));
    const address = http.address();
    const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    assert.equal((await fetch(`${base}/open`)).status, 200);
    await root.client.sendCommand(['ACL', 'SETUSER', 'web', '-@all']);
    handled = 0;
    assert.equal((await fetch(`${base}/open`)).status, 500, 'fail-open does not admit it');
    assert.equal((await fetch(`${base}/closed`)).status, 500, 'nor is it a 503');
    assert.equal(handled, 0);
    assert.ok(errors.length >= 2 && errors.every((e) => e instanceof RedisConfigError));
  });
});
