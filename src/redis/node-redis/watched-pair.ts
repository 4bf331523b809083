/**
 * The node-redis client and its script connection as one connection for the stall
 * watchdog: probed together (a `PING` on each), recycled together (a stall of either path
 * recycles both, reported once), reopened together; `'connect'` when either connects,
 * `'ready'` when both are ready.
 */
import { EventEmitter } from 'node:events';
import type { RespConnection } from '../resp/connection.js';
import type { WatchedClient } from '../stall-watchdog.js';

/** Settles when both have settled: rejects with the first failure, if any. */
async function both(a: Promise<unknown>, b: Promise<unknown>): Promise<void> {
  const [first, second] = await Promise.allSettled([a, b]);
  if (first.status === 'rejected') throw first.reason;
  if (second.status === 'rejected') throw second.reason;
}

/**
 * @param destroy destroys both connections (the connection's own recycle, which its owner's
 *   `'end'` listener must not take for a close)
 */
export function watchedPair(
  client: WatchedClient,
  scripts: RespConnection,
  destroy: () => void,
): WatchedClient {
  const events = new EventEmitter();
  events.on('error', () => {});
  const ready = () => {
    if (client.isReady && scripts.isReady) events.emit('ready');
  };
  for (const source of [client, scripts] as const) {
    source.on('connect', () => events.emit('connect'));
    source.on('ready', ready);
    source.on('error', () => events.emit('error'));
  }
  return {
    get isOpen() {
      return client.isOpen;
    },
    get isReady() {
      return client.isReady && scripts.isReady;
    },
    // Settled once both are: a probe stays outstanding while either PING is unanswered, and
    // an attempt while either connection is still opening (the watchdog's stop() destroys a
    // connection left opening once the attempt settles).
    sendCommand: (args) => both(client.sendCommand(args), scripts.call(args)),
    destroy,
    connect: () => {
      // The script connection first: an owner closing the connection from inside the
      // client's connect() then finds both connections opening, and closes both.
      const opening = scripts.connect();
      return both(client.connect(), opening);
    },
    on: (event, listener) => events.on(event, listener),
    off: (event, listener) => events.off(event, listener),
  };
}
