/**
 * The script connection beside an application's own node-redis client
 * (`src/redis/node-redis/beside-client.ts`): the limiter's scripts go over a connection of
 * sluice's own set up from the client's options, written at once, while the client is open;
 * over the client while that connection is down; and it ends with the client.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient, type RedisClientType } from 'redis';
import { fixedWindow, isSluiceError, RateLimiter } from 'sluice';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import {
  ScriptConnectionBeside,
  scriptConnectionOptionsOf,
} from '../../src/redis/node-redis/beside-client.js';
import { nodeScript } from '../helpers/node-script.js';
import { keyFor, randomTenant, useRedis } from '../helpers/redis.js';
import { boundFor } from '../helpers/within.js';

const redis = useRedis();
const servers: PrivateRedis[] = [];
const clients: { isOpen: boolean; destroy(): void }[] = [];
after(async () => {
  for (const client of clients) if (client.isOpen) client.destroy();
  for (const server of servers) await server.stop();
});
const route = 'POST/orders';
const policy = fixedWindow({ limit: 50, windowMs: 60_000 });

type OwnClient = RedisClientType;

async function ownClient(url: string, extra: Record<string, unknown> = {}): Promise<OwnClient> {
  const client = createClient({ url, disableOfflineQueue: true, ...extra }) as RedisClientType;
  client.on('error', () => {});
  clients.push(client);
  await client.connect();
  return client;
}

/** `CLIENT LIST` through `client`, each connection as its fields. */
async function clientList(client: OwnClient): Promise<Record<string, string>[]> {
  const text = String(await client.sendCommand(['CLIENT', 'LIST']));
  return text
    .trim()
    .split('\n')
    .map((line) =>
      Object.fromEntries(
        line
          .trim()
          .split(' ')
          .map((field) => [
            field.slice(0, field.indexOf('=')),
            field.slice(field.indexOf('=') + 1),
          ]),
      ),
    );
}

async function until(condition: () => boolean, withinMs: number, what: string): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`not within ${withinMs} ms: ${what}`);
    await sleep(5);
  }
}

function beside(client: OwnClient): ScriptConnectionBeside {
  const made = ScriptConnectionBeside.of(client);
  assert.ok(made, 'a script connection beside the client');
  return made;
}

function outcome(take: Promise<{ allowed: boolean }>): Promise<string> {
  return take.then(
    (d) => (d.allowed ? 'allowed' : 'limited'),
    (error: unknown) => (isSluiceError(error) ? error.code : `untyped: ${String(error)}`),
  );
}

describe('script connection beside an own node-redis client: routing', () => {
  it('takes go over a connection named sluice, written at once; the client carries the rest; exact under 300 concurrent takes', async () => {
    const client = await ownClient(redis.server.url);
    const limiter = new RateLimiter({ client, timeoutMs: 2000 });
    await until(() => beside(client).ready !== undefined, 2000, 'the connection beside is ready');
    const tenant = randomTenant();
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, () => outcome(limiter.take({ tenant, route }, policy))),
    );
    assert.equal(outcomes.filter((o) => o === 'allowed').length, 50);
    assert.equal(outcomes.filter((o) => o === 'limited').length, 250);
    const list = await clientList(client);
    const scripts = list.filter((c) => c.name === 'sluice');
    assert.equal(scripts.length, 1, JSON.stringify(list));
    assert.match(scripts[0]?.cmd ?? '', /^eval/);
    // The application's client sent no script (its last command is this CLIENT LIST).
    assert.equal(list.filter((c) => /^eval/.test(c.cmd ?? '')).length, 1);
    // A second limiter on the same client shares the one connection.
    const second = new RateLimiter({ client });
    assert.equal((await second.take({ tenant: randomTenant(), route }, policy)).allowed, true);
    assert.equal((await clientList(client)).filter((c) => c.name === 'sluice').length, 1);
  });

  it('scriptConnection: false keeps every script on the client; with another client it is an InvalidInputError', async () => {
    const client = await ownClient(redis.server.url);
    const before = (await clientList(client)).filter((c) => c.name === 'sluice').length;
    const limiter = new RateLimiter({ client, scriptConnection: false });
    assert.equal((await limiter.take({ tenant: randomTenant(), route }, policy)).allowed, true);
    const list = await clientList(client);
    assert.equal(list.filter((c) => c.name === 'sluice').length, before, JSON.stringify(list));
    const connection = await redis.client();
    assert.throws(
      () => new RateLimiter({ client: connection, scriptConnection: true }),
      (error: unknown) =>
        isSluiceError(error) &&
        error.code === 'SLUICE_INVALID_INPUT' &&
        (error as { field?: string }).field === 'options.scriptConnection',
    );
    assert.throws(
      () => new RateLimiter({ client, scriptConnection: 'yes' as unknown as boolean }),
      /options\.scriptConnection/,
    );
  });
});

describe('script connection beside an own node-redis client: setup', () => {
  it('AUTH (requirepass, an ACL user, credentials in the URL) and the database: the keys land where the client points', async () => {
    const server = await startRedisServer(['--requirepass', 'sesame']);
    servers.push(server);
    const admin = await ownClient(server.url, { password: 'sesame' });
    await admin.sendCommand(['ACL', 'SETUSER', 'app', 'on', '>apppw', '+@all', '~*']);
    const cases = [
      [{ password: 'sesame' }, server.url, 'default', '0'],
      [{ username: 'app', password: 'apppw', database: 3 }, server.url, 'app', '3'],
      [{}, `${server.url.replace('redis://', 'redis://app:apppw@')}/5`, 'app', '5'],
    ] as const;
    for (const [options, url, user, db] of cases) {
      const client = await ownClient(url, options);
      const limiter = new RateLimiter({ client });
      await until(() => beside(client).ready !== undefined, 2000, `${url}: ready`);
      const tenant = randomTenant();
      assert.equal((await limiter.take({ tenant, route }, policy)).allowed, true);
      const scripts = (await clientList(admin)).filter((c) => c.name === 'sluice');
      assert.ok(
        scripts.some((c) => c.user === user && c.db === db && /^eval/.test(c.cmd ?? '')),
        `${JSON.stringify(options)}: ${JSON.stringify(scripts)}`,
      );
      await admin.sendCommand(['SELECT', db]);
      assert.equal(await admin.exists(keyFor(policy, tenant, route)), 1, `the key is in db ${db}`);
      await admin.sendCommand(['SELECT', '0']);
      client.destroy();
    }
  });

  it('options it cannot copy exactly keep the scripts on the client', () => {
    const strategy = () => 100;
    assert.equal(
      scriptConnectionOptionsOf(
        { credentialsProvider: { type: 'streaming-credentials-provider', subscribe() {} } },
        strategy,
      ),
      undefined,
    );
    assert.equal(
      scriptConnectionOptionsOf({ socket: { path: '/s', tls: true } }, strategy),
      undefined,
    );
    assert.equal(scriptConnectionOptionsOf({ database: 'x' }, strategy), undefined);
    assert.equal(scriptConnectionOptionsOf(undefined, strategy), undefined);
    assert.equal(ScriptConnectionBeside.of({ sendCommand: async () => 1 }), undefined);
    const tls = scriptConnectionOptionsOf(
      {
        socket: {
          host: 'h',
          port: 7000,
          tls: true,
          ca: 'CA',
          servername: 'sn',
          connectTimeout: 900,
        },
        database: 2,
      },
      strategy,
    );
    assert.deepEqual(
      { ...tls, reconnectStrategy: undefined, credentials: undefined },
      {
        host: 'h',
        port: 7000,
        tls: { ca: 'CA', servername: 'sn' },
        database: 2,
        name: 'sluice',
        connectTimeoutMs: 900,
        reconnectStrategy: undefined,
        credentials: undefined,
      },
    );
    const plain = scriptConnectionOptionsOf({}, strategy);
    assert.equal(plain?.host, 'localhost');
    assert.equal(plain?.port, 6379);
    assert.equal(plain?.tls, undefined);
    assert.equal(plain?.connectTimeoutMs, 5000);
  });
});

describe('script connection beside an own node-redis client: failures and close', () => {
  it('lost and refused again: the scripts go over the client meanwhile, every take decided and exact, and it comes back', async () => {
    const server = await startRedisServer();
    servers.push(server);
    const client = await ownClient(server.url);
    const limiter = new RateLimiter({ client, timeoutMs: 2000 });
    const connection = beside(client);
    await until(() => connection.ready !== undefined, 2000, 'ready');
    const tenant = randomTenant();
    const first = await Promise.all(
      Array.from({ length: 20 }, () => outcome(limiter.take({ tenant, route }, policy))),
    );
    assert.deepEqual(new Set(first), new Set(['allowed']));
    // Kill it, and keep it out: the server takes no connection beyond the client's.
    const list = await clientList(client);
    const id = list.find((c) => c.name === 'sluice')?.id;
    assert.ok(id, JSON.stringify(list));
    await client.sendCommand(['CONFIG', 'SET', 'maxclients', String(list.length - 1)]);
    await client.sendCommand(['CLIENT', 'KILL', 'ID', id]);
    await until(() => connection.ready === undefined, 2000, 'the loss noticed');
    const during = await Promise.all(
      Array.from({ length: 100 }, () => outcome(limiter.take({ tenant, route }, policy))),
    );
    assert.equal(during.filter((o) => o === 'allowed').length, 30, JSON.stringify(during));
    assert.equal(during.filter((o) => o === 'limited').length, 70);
    assert.ok(
      (await clientList(client)).every((c) => c.name !== 'sluice'),
      'decided over the client',
    );
    await client.sendCommand(['CONFIG', 'SET', 'maxclients', '1000']);
    await until(() => connection.ready !== undefined, 5000, 'the connection beside is back');
    const other = randomTenant();
    assert.equal((await limiter.take({ tenant: other, route }, policy)).allowed, true);
    assert.match((await clientList(client)).find((c) => c.name === 'sluice')?.cmd ?? '', /^eval/);
  });

  it('refused by the server (maxclients): a SLUICE_SCRIPT_CONNECTION warning, and the takes go over the client', async () => {
    const server = await startRedisServer();
    servers.push(server);
    const client = await ownClient(server.url);
    await client.sendCommand(['CONFIG', 'SET', 'maxclients', '1']);
    const warnings: Error[] = [];
    const listen = (warning: Error & { code?: string }) => {
      if (warning.code === 'SLUICE_SCRIPT_CONNECTION') warnings.push(warning);
    };
    process.on('warning', listen);
    try {
      const limiter = new RateLimiter({ client });
      await until(() => warnings.length > 0, 3000, 'a warning');
      assert.match(warnings[0]?.message ?? '', /max number of clients/);
      const tenant = randomTenant();
      for (let i = 0; i < 5; i++) {
        assert.equal((await limiter.take({ tenant, route }, policy)).allowed, true);
      }
      assert.equal(beside(client).ready, undefined);
    } finally {
      process.off('warning', listen);
      client.destroy();
    }
  });

  it('the client closed: a take fails with UnavailableError, the connection beside ends, and the process exits by itself', async () => {
    const client = await ownClient(redis.server.url);
    const limiter = new RateLimiter({ client });
    const connection = beside(client);
    await until(() => connection.ready !== undefined, 2000, 'ready');
    await client.close();
    await assert.rejects(
      limiter.take({ tenant: randomTenant(), route }, policy),
      (error: unknown) => isSluiceError(error) && error.code === 'SLUICE_UNAVAILABLE',
    );
    await until(
      () => !connection.connection.isOpen,
      1000,
      'the connection beside closed with the client',
    );
    // A process that unrefs its client exits with the connection beside still open.
    const child = spawn(
      process.execPath,
      [
        ...nodeScript(new URL('../fixtures/beside-client-exit.ts', import.meta.url)),
        redis.server.url,
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
      child.on('exit', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    assert.equal(code, 0);
    assert.match(out, /allowed over the connection beside: true/);
  });
});
