/**
 * Reset propagation: how every limiter sharing a Redis stops answering cached denials for a
 * scope that `reset` cleared, within {@link EPOCH_VALID_MS}.
 *
 * Each namespace has an epoch key holding a random token; `reset` deletes the scope's key,
 * then stores a new token. A limiter uses its local denial cache only while it has confirmed
 * the token it knows within the last `EPOCH_VALID_MS` (the confirmation's age counted from
 * when the read was *sent*); while cached denials are being answered it reads the token again
 * every `EPOCH_POLL_MS`. A changed token empties the cache, and denials decided before that
 * read was sent are not cached again. So a cached denial is never answered later than
 * `EPOCH_VALID_MS` after a reset resolved, whatever happens to the connection (a read that
 * fails or never returns only stops the cache being used).
 *
 * Polling was chosen over pub/sub: it needs no second connection per limiter, no
 * subscription to re-establish after a failover, and its bound holds even when a message
 * would have been lost. It costs one `GET` per `EPOCH_POLL_MS` per limiter, only while the
 * cache is answering.
 */
import { randomUUID } from 'node:crypto';
import { loadScript } from '../algorithms/script.js';
import type { TwinState } from '../algorithms/twin.js';

/** Reads or replaces the epoch token. */
export const resetEpochScript = loadScript('reset-epoch', import.meta.url, 1);

/** Cached denials are answered only within this many ms of a confirmed epoch read. */
export const EPOCH_VALID_MS = 750;
/** A new epoch read is sent, while the cache answers, once the last is this old (ms). */
export const EPOCH_POLL_MS = 250;
/** TTL of the epoch key (24 h): an expired key reads as '', a change like any other. */
export const EPOCH_TTL_MS = 86_400_000;

/** A fresh epoch token. */
export function newEpochToken(): string {
  return randomUUID();
}

/** The in-memory twin of `reset-epoch.lua`. */
export function resetEpochTwin(
  state: TwinState,
  keys: readonly string[],
  args: readonly string[],
): string {
  const key = keys[0] as string;
  const token = args[0] ?? '';
  if (token !== '') {
    state.set(key, 'string', token, Number(args[1]));
    return token;
  }
  return state.get<string>(key, 'string') ?? '';
}
