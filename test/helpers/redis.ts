/**
 * Test fixtures: a private redis-server per test file (never the shared one), clients that
 * the file closes, and small helpers to read Redis state directly.
 */

import { after, before } from 'node:test';
import { type ConnectRedisOptions, connectRedis } from 'sluice/node-redis';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { scopeKey } from '../../src/key.js';

export type Client = Awaited<ReturnType<typeof connectRedis>>;

/**
 * The deadline of a limiter in a test of what is decided, not of how fast: sluice's default
 * (150 ms) is a production latency budget, and a run of the suite (four files at once on two
 * cores, each with its own Redis) now and then holds a call past it — a loaded run failed a
 * GLIDE exactness test on a first take that took over 150 ms. Tests of deadlines set theirs.
 */
export const TEST_TIMEOUT_MS = 1000;

export interface RedisFixture {
  /** The server; valid inside tests (after `before`). */
  readonly server: PrivateRedis;
  /**
   * A client set up like sluice's (no offline queue), destroyed after the file. `url`
   * defaults to the fixture's server; `reconnect` to false.
   */
  client(options?: ClientOptions): Promise<Client>;
  /**
   * A connection for inspecting state (`admin.client.get`, `pTTL`, `info`): node-redis alone,
   * closed after the file.
   */
  admin(): Promise<Client>;
}

/** Options of {@link RedisFixture.client}: those of `connectRedis` that tests vary. */
export type ClientOptions = Pick<
  ConnectRedisOptions,
  'reconnect' | 'url' | 'stallTimeoutMs' | 'onStall' | 'onReconnect' | 'fastPath'
>;

/** Starts a private Redis before the file's tests and stops it (by pid) after them. */
export function useRedis(extraArgs: string[] = []): RedisFixture {
  let server: PrivateRedis | undefined;
  const clients: Client[] = [];
  let adminClient: Client | undefined;
  before(async () => {
    server = await startRedisServer(extraArgs);
  });
  after(async () => {
    for (const client of clients) client.destroy(); // idempotent, whatever its state
    await server?.stop();
  });
  const fixture: RedisFixture = {
    get server() {
      if (!server) throw new Error('redis fixture used outside a test');
      return server;
    },
    async client(options = {}) {
      const client = await connectRedis({
        ...options,
        url: options.url ?? fixture.server.url,
        reconnect: options.reconnect ?? false,
        onError: () => {}, // the tests assert on the typed outcomes instead
      });
      clients.push(client);
      return client;
    },
    async admin() {
      if (adminClient?.isReady) return adminClient;
      // node-redis alone (no script connection, no watchdog), for the commands of tests.
      const client = await connectRedis({
        url: fixture.server.url,
        reconnect: false,
        fastPath: false,
        stallTimeoutMs: 0,
        onError: () => {},
      });
      clients.push(client);
      adminClient = client;
      return client;
    },
  };
  return fixture;
}

/** Calls of one command recorded by `INFO commandstats` (0 when never called). */
export async function commandCalls(client: Client, command: string): Promise<number> {
  const info = await client.client.info('commandstats');
  const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
  return match ? Number(match[1]) : 0;
}

/** A fresh random tenant id, so tests never need FLUSHDB. */
export function randomTenant(): string {
  return `t-${Math.random().toString(36).slice(2)}-${Date.now()}`;
}

/**
 * Puts a server (`maxmemory-policy noeviction`) well over its memory limit, so that every
 * write is refused (OOM) whatever its own memory does meanwhile (client buffers come and go):
 * 2 MB written, then `maxmemory` set 1 MB below what is used.
 */
export async function fillMemory(client: Client): Promise<void> {
  for (let i = 0; i < 32; i++) await client.client.set(`filler:${i}`, 'x'.repeat(64 * 1024));
  const info = String(await client.client.info('memory'));
  const used = Number(/used_memory:(\d+)/.exec(info)?.[1]);
  await client.client.sendCommand(['CONFIG', 'SET', 'maxmemory', String(used - 1024 * 1024)]);
}

/** The Redis key of `{ tenant, route }` under `policy` (key scheme v2), as a limiter builds it. */
export function keyFor(
  policy: { readonly id: string },
  tenant: string,
  route?: string,
  namespace = 'rate',
): string {
  return scopeKey(namespace, policy.id, tenant, route, undefined);
}
