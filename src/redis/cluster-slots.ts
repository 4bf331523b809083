/**
 * What the Redis Cluster stores of every client share: whether a batch's keys span hash
 * slots (then it is sent as the `allow-cross-slot-keys` batch script), and whether a
 * failure says the batch went to a node that does not serve one of its slots (then nothing
 * of it ran, and the coalescer resends each call alone: `RerouteError`).
 */
import calculateSlot from 'cluster-key-slot';
import { isRedirection } from './reply-errors.js';

/**
 * Whether `keys` name more than one hash slot. `prefix` is what the client puts before
 * every key (ioredis's `keyPrefix`), which can change a key's slot.
 */
export function spansSlots(keys: readonly string[], prefix = ''): boolean {
  if (keys.length < 2) return false;
  const first = calculateSlot(prefix + (keys[0] as string));
  for (let i = 1; i < keys.length; i++) {
    if (calculateSlot(prefix + (keys[i] as string)) !== first) return true;
  }
  return false;
}

/** What clients put before the reply they gave up on, and sluice before a "not now" reply. */
const WRAPPERS =
  /^(?:Redis is not serving: |Redis unavailable: )?(?:Too many Cluster redirections\. Last error: (?:\w+: )?)?/;

/**
 * A replica's refusal of a script that may write, before running it: the cross-slot batch
 * (no declared keys, so no `MOVED`) reached a primary that a failover demoted before the
 * client's slot map knew.
 */
const REPLICA_REFUSAL = /^READONLY\b/;

/**
 * Whether a failure says the batch went to a node that does not serve one of its slots: a
 * redirection reply (`MOVED`, `ASK`, `TRYAGAIN`, `CROSSSLOT`), or a replica's `READONLY`
 * (which refuses the batch script before running it), anywhere in its chain of causes.
 * Clients that give up following redirections wrap the last one: node-redis as the cause
 * of "Too many Cluster redirections", ioredis in the message ("Too many Cluster
 * redirections. Last error: ReplyError: MOVED …").
 */
export function redirected(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const reply = current.message.replace(WRAPPERS, '');
    if (isRedirection(reply) || REPLICA_REFUSAL.test(reply)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
