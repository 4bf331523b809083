/**
 * The first connection of a client given to a limiter before it is usable: a process that
 * creates its client and its limiter and takes traffic at once (a deploy) would otherwise see
 * its first calls fail — the client still connecting refuses them, having no offline queue,
 * and a cluster client that says "ready" once it has the slot map still sets up its
 * primaries' connections (ioredis: the calls racing one fail with "Connection is closed").
 *
 * `firstConnection` returns a promise that settles once the client is usable, once its first
 * attempt has failed (a refused or unreachable server: calls then fail as they would have,
 * at once), or after a bound — or `undefined` when it is usable already. It never rejects and
 * sends nothing but a `PING` to a cluster primary whose connection is not up yet. Clients are
 * read by duck typing, as elsewhere: nothing here loads a client library.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { readProperty as read } from '../call-safely.js';

/** The longest the first connection is waited for, in ms: then calls go as they come. */
export const FIRST_CONNECTION_MS = 10_000;

/** The longest a connected cluster's primaries are waited for, in ms. */
export const PRIMARIES_MS = 2_000;

const POLL_MS = 10;

interface Emitter {
  once(event: string, listener: () => void): unknown;
  removeListener(event: string, listener: () => void): unknown;
}

function isEmitter(value: unknown): value is Emitter {
  return (
    typeof read(value, 'once') === 'function' && typeof read(value, 'removeListener') === 'function'
  );
}

/**
 * The first of `events` on `emitter`, or `ms` passing; `cancel()` stops listening. `error`
 * is never listened to: a listener of ours would change what the client does with errors its
 * owner does not handle.
 */
function firstOf(
  emitter: Emitter,
  events: readonly string[],
  ms: number,
): { readonly done: Promise<void>; cancel(): void } {
  let cancel = () => {};
  const done = new Promise<void>((resolve) => {
    const finish = () => {
      clearTimeout(timer);
      for (const event of events) emitter.removeListener(event, finish);
      resolve();
    };
    cancel = finish;
    const timer = setTimeout(finish, ms);
    timer.unref();
    for (const event of events) emitter.once(event, finish);
  });
  return { done, cancel };
}

/** Polls `check` every 10 ms until it holds or `ms` passes. */
async function until(check: () => boolean, ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (!check() && performance.now() < end) await sleep(POLL_MS, undefined, { ref: false });
}

/** ioredis: a `Redis` or `Cluster` still on its first connection attempt. */
function ioredisConnecting(client: unknown): boolean {
  const status = read(client, 'status');
  // 'wait' (lazyConnect) is left alone: ioredis connects on the first command.
  return status === 'connecting' || status === 'connect';
}

/** The primaries of an ioredis `Cluster` whose connection is not up yet. */
function ioredisPrimariesDown(cluster: unknown): { status?: unknown; ping(): Promise<unknown> }[] {
  const nodes = read(cluster, 'nodes');
  if (typeof nodes !== 'function') return [];
  try {
    const primaries = nodes.call(cluster, 'master') as {
      status?: unknown;
      ping(): Promise<unknown>;
    }[];
    return primaries.filter((node) => node.status !== 'ready' && typeof node.ping === 'function');
  } catch {
    return [];
  }
}

/**
 * The wait in progress for each client: every limiter made on a client while it connects
 * shares one (one set of listeners, one round of PINGs).
 */
const waiting = new WeakMap<object, Promise<void>>();

function shared(
  client: unknown,
  start: () => Promise<void> | undefined,
): Promise<void> | undefined {
  if (typeof client !== 'object' || client === null) return start();
  const current = waiting.get(client);
  if (current !== undefined) return current;
  const started = start();
  if (started === undefined) return undefined;
  const done = started.finally(() => waiting.delete(client));
  waiting.set(client, done);
  return done;
}

/** An ioredis client: its first connection, then (a `Cluster`) every primary's. */
export function ioredisFirstConnection(
  client: unknown,
  cluster: boolean,
): Promise<void> | undefined {
  return shared(client, () => ioredisWait(client, cluster));
}

function ioredisWait(client: unknown, cluster: boolean): Promise<void> | undefined {
  const connecting = ioredisConnecting(client) && isEmitter(client);
  if (!connecting && !(cluster && read(client, 'status') === 'ready')) return undefined;
  if (!connecting && ioredisPrimariesDown(client).length === 0) return undefined;
  return (async () => {
    if (connecting) {
      await firstOf(
        client as Emitter,
        ['ready', 'close', 'end', 'reconnecting'],
        FIRST_CONNECTION_MS,
      ).done;
    }
    if (!cluster || read(client, 'status') !== 'ready') return;
    const end = performance.now() + PRIMARIES_MS;
    for (;;) {
      const down = ioredisPrimariesDown(client);
      if (down.length === 0 || performance.now() >= end || read(client, 'status') !== 'ready')
        return;
      // A PING makes a primary's lazy connection connect; its failure is the next round's.
      await Promise.all(down.map((node) => node.ping().catch(() => {})));
      if (ioredisPrimariesDown(client).length > 0) await sleep(POLL_MS, undefined, { ref: false });
    }
  })();
}

/**
 * A node-redis client or cluster that is opening (`connect()` called, not ready yet): until
 * it is ready or closed, at most {@link FIRST_CONNECTION_MS}.
 */
export function nodeRedisFirstConnection(
  client: unknown,
  cluster: boolean,
): Promise<void> | undefined {
  return shared(client, () => nodeRedisWait(client, cluster));
}

function nodeRedisWait(client: unknown, cluster: boolean): Promise<void> | undefined {
  const opening = () => read(client, 'isOpen') === true && read(client, 'isReady') === false;
  if (!opening()) return undefined;
  // A client says when its attempt failed ('reconnecting'); without a reconnect strategy it
  // is closed (not open any more); a cluster's connect() rejects, and it is closed again.
  let heard = false;
  const events =
    !cluster && isEmitter(client)
      ? firstOf(client, ['ready', 'end', 'reconnecting'], FIRST_CONNECTION_MS)
      : undefined;
  void events?.done.then(() => {
    heard = true;
  });
  return until(() => heard || !opening(), FIRST_CONNECTION_MS).then(() => events?.cancel());
}
