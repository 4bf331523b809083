/**
 * The script connection beside an application's own node-redis client
 * (`src/redis/beside-client.ts`): the limiter's scripts go over a connection of
 * sluice's own set up from the client's options, written at once, while the client is open;
 * over the client while that connection is down; and it ends with the client.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createClient, type RedisClientType } from 'redis';
import { fixedWindow, isSluiceError, RateLimiter } from 'sluice';
import { IOREDIS_OPTIONS } from 'sluice/ioredis';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { type ClientReader, ScriptConnectionBeside } from '../../src/redis/beside-client.js';
import { IOREDIS_READER, ioredisBesideOptions } from '../../src/redis/ioredis/beside-options.js';
import {
  NODE_REDIS_READER,
  nodeRedisBesideOptions,
} from '../../src/redis/node-redis/beside-options.js';
import { outcome, parseClientList, until } from '../helpers/connections.js';
import { nodeScript } from '../helpers/node-script.js';
import { keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';
import { boundFor } from '../helpers/within.js';

const redis = useRedis();
const servers: PrivateRedis[] = [];
const closers: (() => void)[] = [];
after(async () => {
  for (const close of closers) close();
  for (const server of servers) await server.stop();
});
const route = 'POST/orders';
const policy = fixedWindow({ limit: 50, windowMs: 60_000 });

/** An application's own client, of either kind, as these tests drive it. */
interface OwnClient {
  readonly client: object;
  command(args: string[]): Promise<unknown>;
  /** Closed gracefully by its owner (node-redis `close()`, ioredis `quit()`). */
  close(): Promise<unknown>;
  /** Closed at once (node-redis `destroy()`, ioredis `disconnect()`). */
  destroy(): void;
}

/** Given `auth`: a user, password and database (given as the client's options). */
interface Auth {
  readonly username?: string;
  readonly password?: string;
  readonly database?: number;
}

const KINDS: readonly {
  readonly name: string;
  readonly reader: ClientReader;
  connect(url: string, auth?: Auth): Promise<OwnClient>;
}[] = [
  {
    name: 'node-redis',
    reader: NODE_REDIS_READER,
    async connect(url, auth = {}) {
      const client = createClient({ url, disableOfflineQueue: true, ...auth }) as RedisClientType;
      client.on('error', () => {});
      closers.push(() => client.isOpen && client.destroy());
      await client.connect();
      return {
        client,
        command: (args) => client.sendCommand(args),
        close: () => client.close(),
        destroy: () => client.destroy(),
      };
    },
  },
  {
    name: 'ioredis',
    reader: IOREDIS_READER,
    async connect(url, auth = {}) {
      const { database, ...rest } = auth;
      const client = new Redis(url, {
        ...IOREDIS_OPTIONS,
        ...rest,
        ...(database === undefined ? {} : { db: database }),
        lazyConnect: true,
      });
      client.on('error', () => {});
      closers.push(() => client.disconnect());
      await client.connect();
      return {
        client,
        command: ([name, ...args]) => client.call(name as string, args),
        close: () => client.quit(),
        destroy: () => client.disconnect(),
      };
    },
  },
];

/** `CLIENT LIST` through `own`, each connection as its fields. */
async function clientList(own: OwnClient): Promise<Record<string, string>[]> {
  return parseClientList(await own.command(['CLIENT', 'LIST']));
}

for (const kind of KINDS) {
  /** The connection beside `own`'s client (made by its first limiter). */
  const beside = (own: OwnClient): ScriptConnectionBeside => {
    const made = ScriptConnectionBeside.of(own.client, kind.reader);
    assert.ok(made, 'a script connection beside the client');
    return made;
  };
  const ownClient = kind.connect;

  describe(`script connection beside an own ${kind.name} client: routing`, () => {
    it('takes go over a connection named sluice, written at once; the client carries the rest; exact under 300 concurrent takes', async () => {
      const own = await ownClient(redis.server.url);
      // The connections of this test: those that were not there before it.
      const earlier = new Set((await clientList(own)).map((c) => c.id));
      const fresh = async () => (await clientList(own)).filter((c) => !earlier.has(c.id));
      const limiter = new RateLimiter({ client: own.client as never, timeoutMs: 2000 });
      await until(() => beside(own).ready !== undefined, 2000, 'the connection beside is ready');
      const tenant = randomTenant();
      const outcomes = await Promise.all(
        Array.from({ length: 300 }, () => outcome(limiter.take({ tenant, route }, policy))),
      );
      assert.equal(outcomes.filter((o) => o === 'allowed').length, 50);
      assert.equal(outcomes.filter((o) => o === 'limited').length, 250);
      const list = await fresh();
      const scripts = list.filter((c) => c.name === 'sluice');
      assert.equal(scripts.length, 1, JSON.stringify(list));
      assert.match(scripts[0]?.cmd ?? '', /^eval/);
      // The application's client sent no script: the only connection that did is sluice's.
      assert.equal(list.filter((c) => /^eval/.test(c.cmd ?? '')).length, 1, JSON.stringify(list));
      // A second limiter on the same client shares the one connection.
      const second = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: own.client as never });
      assert.equal((await second.take({ tenant: randomTenant(), route }, policy)).allowed, true);
      assert.equal((await fresh()).filter((c) => c.name === 'sluice').length, 1);
    });

    it('scriptConnection: false keeps every script on the client; with another client it is an InvalidInputError', async () => {
      const own = await ownClient(redis.server.url);
      const before = (await clientList(own)).filter((c) => c.name === 'sluice').length;
      const limiter = new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client: own.client as never,
        scriptConnection: false,
      });
      assert.equal((await limiter.take({ tenant: randomTenant(), route }, policy)).allowed, true);
      const list = await clientList(own);
      assert.equal(list.filter((c) => c.name === 'sluice').length, before, JSON.stringify(list));
      const connection = await redis.client();
      assert.throws(
        () =>
          new RateLimiter({
            timeoutMs: TEST_TIMEOUT_MS,
            client: connection,
            scriptConnection: true,
          }),
        (error: unknown) =>
          isSluiceError(error) &&
          error.code === 'SLUICE_INVALID_INPUT' &&
          (error as { field?: string }).field === 'options.scriptConnection',
      );
      assert.throws(
        () =>
          new RateLimiter({
            timeoutMs: TEST_TIMEOUT_MS,
            client: own.client as never,
            scriptConnection: 'yes' as unknown as boolean,
          }),
        /options\.scriptConnection/,
      );
    });
  });

  describe(`script connection beside an own ${kind.name} client: setup`, () => {
    it('AUTH (requirepass, an ACL user, credentials in the URL) and the database: the keys land where the client points', async () => {
      const server = await startRedisServer(['--requirepass', 'sesame']);
      servers.push(server);
      const admin = await ownClient(server.url, { password: 'sesame' });
      await admin.command(['ACL', 'SETUSER', 'app', 'on', '>apppw', '+@all', '~*']);
      const cases = [
        [{ password: 'sesame' }, server.url, 'default', '0'],
        [{ username: 'app', password: 'apppw', database: 3 }, server.url, 'app', '3'],
        [{}, `${server.url.replace('redis://', 'redis://app:apppw@')}/5`, 'app', '5'],
      ] as const;
      for (const [options, url, user, db] of cases) {
        const own = await ownClient(url, options);
        const limiter = new RateLimiter({
          timeoutMs: TEST_TIMEOUT_MS,
          client: own.client as never,
        });
        await until(() => beside(own).ready !== undefined, 2000, `${url}: ready`);
        const tenant = randomTenant();
        assert.equal((await limiter.take({ tenant, route }, policy)).allowed, true);
        const scripts = (await clientList(admin)).filter((c) => c.name === 'sluice');
        assert.ok(
          scripts.some((c) => c.user === user && c.db === db && /^eval/.test(c.cmd ?? '')),
          `${JSON.stringify(options)}: ${JSON.stringify(scripts)}`,
        );
        await admin.command(['SELECT', db]);
        assert.equal(
          Number(await admin.command(['EXISTS', keyFor(policy, tenant, route)])),
          1,
          `the key is in db ${db}`,
        );
        await admin.command(['SELECT', '0']);
        own.destroy();
      }
    });
  });

  describe(`script connection beside an own ${kind.name} client: failures and close`, () => {
    it('lost and refused again: the scripts go over the client meanwhile, every take decided and exact, and it comes back', async () => {
      const server = await startRedisServer();
      servers.push(server);
      const own = await ownClient(server.url);
      const limiter = new RateLimiter({ client: own.client as never, timeoutMs: 2000 });
      const connection = beside(own);
      await until(() => connection.ready !== undefined, 2000, 'ready');
      const tenant = randomTenant();
      const first = await Promise.all(
        Array.from({ length: 20 }, () => outcome(limiter.take({ tenant, route }, policy))),
      );
      assert.deepEqual(new Set(first), new Set(['allowed']));
      // Kill it, and keep it out: the server takes no connection beyond the client's.
      const list = await clientList(own);
      const id = list.find((c) => c.name === 'sluice')?.id;
      assert.ok(id, JSON.stringify(list));
      await own.command(['CONFIG', 'SET', 'maxclients', String(list.length - 1)]);
      await own.command(['CLIENT', 'KILL', 'ID', id]);
      await until(() => connection.ready === undefined, 2000, 'the loss noticed');
      const during = await Promise.all(
        Array.from({ length: 100 }, () => outcome(limiter.take({ tenant, route }, policy))),
      );
      assert.equal(during.filter((o) => o === 'allowed').length, 30, JSON.stringify(during));
      assert.equal(during.filter((o) => o === 'limited').length, 70);
      assert.ok(
        (await clientList(own)).every((c) => c.name !== 'sluice'),
        'decided over the client',
      );
      await own.command(['CONFIG', 'SET', 'maxclients', '1000']);
      await until(() => connection.ready !== undefined, 5000, 'the connection beside is back');
      const other = randomTenant();
      assert.equal((await limiter.take({ tenant: other, route }, policy)).allowed, true);
      assert.match((await clientList(own)).find((c) => c.name === 'sluice')?.cmd ?? '', /^eval/);
    });

    it('refused by the server (maxclients): a SLUICE_SCRIPT_CONNECTION warning, and the takes go over the client', async () => {
      const server = await startRedisServer();
      servers.push(server);
      const own = await ownClient(server.url);
      await own.command(['CONFIG', 'SET', 'maxclients', '1']);
      const warnings: Error[] = [];
      const listen = (warning: Error & { code?: string }) => {
        if (warning.code === 'SLUICE_SCRIPT_CONNECTION') warnings.push(warning);
      };
      process.on('warning', listen);
      try {
        const limiter = new RateLimiter({
          timeoutMs: TEST_TIMEOUT_MS,
          client: own.client as never,
        });
        await until(() => warnings.length > 0, 3000, 'a warning');
        assert.match(warnings[0]?.message ?? '', /max number of clients/);
        const tenant = randomTenant();
        for (let i = 0; i < 5; i++) {
          assert.equal((await limiter.take({ tenant, route }, policy)).allowed, true);
        }
        assert.equal(beside(own).ready, undefined);
      } finally {
        process.off('warning', listen);
        own.destroy();
      }
    });

    it('the client closed: a take fails with UnavailableError, the connection beside ends, and the process exits by itself', async () => {
      const own = await ownClient(redis.server.url);
      const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: own.client as never });
      const connection = beside(own);
      await until(() => connection.ready !== undefined, 2000, 'ready');
      await own.close();
      await assert.rejects(
        limiter.take({ tenant: randomTenant(), route }, policy),
        (error: unknown) => isSluiceError(error) && error.code === 'SLUICE_UNAVAILABLE',
      );
      await until(
        () => !connection.connection.isOpen,
        1000,
        'the connection beside closed with the client',
      );
      // A process exits by itself once its client is unref'd (node-redis) or quit (ioredis).
      const child = spawn(
        process.execPath,
        [
          ...nodeScript(new URL('../fixtures/beside-client-exit.ts', import.meta.url)),
          redis.server.url,
          kind.name,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
      });
      const code = await new Promise<number | null>((resolve, reject) => {
        const timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`the process did not exit within ${boundFor(10_000)} ms: ${out}`));
        }, boundFor(10_000));
        // 'close': its stdout read to the end.
        child.on('close', (exitCode) => {
          clearTimeout(timer);
          resolve(exitCode);
        });
      });
      assert.equal(code, 0);
      assert.match(out, /allowed over the connection beside: true/);
    });

    it('closed gracefully by its owner mid-burst: the takes already sent on the connection beside get their answers', async () => {
      const own = await ownClient(redis.server.url);
      const limiter = new RateLimiter({ client: own.client as never, timeoutMs: 2000 });
      const connection = beside(own);
      await until(() => connection.ready !== undefined, 2000, 'ready');
      const tenant = randomTenant();
      const takes = Array.from({ length: 200 }, () =>
        outcome(limiter.take({ tenant, route }, policy)),
      );
      await sleep(0); // the turn ends: the takes are written on the connection beside
      await own.close();
      const outcomes = await Promise.all(takes);
      assert.equal(outcomes.filter((o) => o === 'allowed').length, 50, JSON.stringify(outcomes));
      assert.equal(outcomes.filter((o) => o === 'limited').length, 150);
      await until(() => !connection.connection.isOpen, 3000, 'closed after its answers');
    });

    it('stuck (its path black-holed, the client fine): the stall watchdog replaces it, with a warning, and the takes resume', async () => {
      const proxy = await freezingProxy(redis.server.port);
      const warnings: string[] = [];
      const listen = (warning: Error & { code?: string }) => {
        if (warning.code === 'SLUICE_SCRIPT_CONNECTION') warnings.push(warning.message);
      };
      process.on('warning', listen);
      try {
        const own = await ownClient(`redis://127.0.0.1:${proxy.port}`);
        const limiter = new RateLimiter({ client: own.client as never, timeoutMs: 300 });
        const connection = beside(own);
        await until(() => connection.ready !== undefined, 2000, 'ready');
        const tenant = randomTenant();
        assert.equal(await outcome(limiter.take({ tenant, route }, policy)), 'allowed');
        proxy.freezeSluice();
        const stuck = await outcome(limiter.take({ tenant, route }, policy));
        assert.ok(['SLUICE_TIMEOUT', 'SLUICE_UNAVAILABLE'].includes(stuck), stuck);
        // Replaced within the watchdog's 2 s (a PING a second), and decided again.
        const deadline = performance.now() + boundFor(8000);
        let last = stuck;
        while (last !== 'allowed' && performance.now() < deadline) {
          await sleep(100);
          last = await outcome(limiter.take({ tenant, route }, policy));
        }
        assert.equal(last, 'allowed', 'decided again after the replacement');
        assert.ok(
          warnings.some((w) => /stall|answer/i.test(w)),
          `a warning: ${JSON.stringify(warnings)}`,
        );
        own.destroy();
      } finally {
        process.off('warning', listen);
        await proxy.close();
      }
    });
  });
}

describe('script connection beside an own node-redis client: its own lifecycle', () => {
  it('its reconnect strategy gave up (terminated, no end): the connection beside closes too', async () => {
    const client = createClient({
      url: redis.server.url,
      disableOfflineQueue: true,
      socket: { reconnectStrategy: false },
    });
    client.on('error', () => {});
    closers.push(() => client.isOpen && client.destroy());
    await client.connect();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: client as never });
    const connection = ScriptConnectionBeside.of(client, NODE_REDIS_READER);
    assert.ok(connection);
    await until(() => connection.ready !== undefined, 2000, 'ready');
    assert.equal((await limiter.take({ tenant: randomTenant(), route }, policy)).allowed, true);
    const id = String(await client.sendCommand(['CLIENT', 'ID']));
    const admin = await redis.admin();
    await admin.client.sendCommand(['CLIENT', 'KILL', 'ID', id]);
    await until(() => !client.isOpen, 2000, 'the client gave up');
    await until(() => !connection.connection.isOpen, 2000, 'the connection beside closed');
  });

  it('views of one client (withCommandOptions) share one connection beside it', async () => {
    const own = await KINDS[0]?.connect(redis.server.url);
    assert.ok(own);
    const client = own.client as RedisClientType;
    const earlier = new Set((await clientList(own)).map((c) => c.id));
    for (let i = 0; i < 5; i++) {
      const view = client.withCommandOptions({ timeout: 1000 + i });
      const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: view as never });
      assert.equal((await limiter.take({ tenant: randomTenant(), route }, policy)).allowed, true);
    }
    const made = (await clientList(own)).filter((c) => !earlier.has(c.id) && c.name === 'sluice');
    assert.equal(made.length, 1, JSON.stringify(made));
  });
});

/**
 * A proxy to Redis that can black-hole the connections named `sluice` open now (their bytes
 * dropped both ways, never closed), and passes every other connection, and later ones.
 */
async function freezingProxy(
  redisPort: number,
): Promise<{ port: number; freezeSluice(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const named = new Set<{ frozen: boolean }>();
  const server = createServer((downstream) => {
    const upstream = connect(redisPort, '127.0.0.1');
    const state = { frozen: false };
    let seen = '';
    sockets.add(downstream).add(upstream);
    downstream.on('data', (chunk: Buffer) => {
      if (seen.length < 512) {
        seen += chunk.toString('latin1');
        if (/SETNAME\r\n\$6\r\nsluice/.test(seen)) named.add(state);
      }
      if (!state.frozen) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!state.frozen) downstream.write(chunk);
    });
    const end = () => {
      downstream.destroy();
      upstream.destroy();
    };
    downstream.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    freezeSluice() {
      for (const state of named) state.frozen = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('script connection beside an own client: the options it copies', () => {
  it('node-redis: host and port (its defaults), TLS with its tls.connect options, database, connect timeout; not what it cannot copy', () => {
    assert.equal(
      nodeRedisBesideOptions({
        credentialsProvider: { type: 'streaming-credentials-provider', subscribe() {} },
      }),
      undefined,
    );
    assert.equal(nodeRedisBesideOptions({ socket: { path: '/s', tls: true } }), undefined);
    assert.equal(nodeRedisBesideOptions({ database: 'x' }), undefined);
    // node-redis closes a socket idle for socketTimeout for good: the client's own could idle.
    assert.equal(nodeRedisBesideOptions({ socket: { socketTimeout: 1500 } }), undefined);
    assert.equal(nodeRedisBesideOptions(undefined), undefined);
    assert.equal(
      ScriptConnectionBeside.of({ sendCommand: async () => 1 }, NODE_REDIS_READER),
      undefined,
    );
    const tls = nodeRedisBesideOptions({
      socket: { host: 'h', port: 7000, tls: true, ca: 'CA', servername: 'sn', connectTimeout: 900 },
      database: 2,
    });
    assert.deepEqual(
      { ...tls, credentials: undefined },
      {
        host: 'h',
        port: 7000,
        tls: { ca: 'CA', servername: 'sn' },
        database: 2,
        name: 'sluice',
        connectTimeoutMs: 900,
        credentials: undefined,
      },
    );
    const plain = nodeRedisBesideOptions({});
    assert.equal(plain?.host, 'localhost');
    assert.equal(plain?.port, 6379);
    assert.equal(plain?.tls, undefined);
    assert.equal(plain?.connectTimeoutMs, 5000);
  });

  it('ioredis: host, port, path, tls, db, user and password; not a Sentinel, a custom Connector or a keyPrefix', async () => {
    assert.equal(ioredisBesideOptions({ sentinels: [{ host: 'h', port: 1 }] }), undefined);
    assert.equal(ioredisBesideOptions({ Connector: class {} }), undefined);
    assert.equal(ioredisBesideOptions({ keyPrefix: 'app:' }), undefined);
    assert.equal(ioredisBesideOptions({ password: () => 'x' }), undefined);
    assert.equal(ioredisBesideOptions({ path: '/s', tls: {} }), undefined);
    const options = ioredisBesideOptions({
      host: 'h',
      port: 7000,
      tls: { ca: 'CA' },
      db: 4,
      username: 'app',
      password: 'pw',
      connectTimeout: 800,
      sentinels: null,
      keyPrefix: '',
    });
    assert.deepEqual(
      { ...options, credentials: undefined },
      {
        host: 'h',
        port: 7000,
        tls: { ca: 'CA' },
        database: 4,
        name: 'sluice',
        connectTimeoutMs: 800,
        credentials: undefined,
      },
    );
    assert.deepEqual(await options?.credentials?.(), { username: 'app', password: 'pw' });
    const plain = ioredisBesideOptions({});
    assert.deepEqual(
      [plain?.host, plain?.port, plain?.tls, plain?.connectTimeoutMs],
      ['localhost', 6379, undefined, 10_000],
    );
    assert.equal(plain?.credentials, undefined);
  });
});
