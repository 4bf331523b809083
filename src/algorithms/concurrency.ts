/**
 * The concurrency policy: at most `limit` leases held at once per scope — how many run at
 * once, not how many start per window (Stripe's "concurrent requests limiter"; the
 * concurrent-requests quota unit of the IETF RateLimit header draft).
 *
 * A lease is acquired with `limiter.acquire` (or an item of `takeAll`, stacked with rate
 * policies) and freed by `release()`, by its expiry `leaseMs` after it was acquired or last
 * renewed (a crashed holder blocks nobody longer than that), never by anyone else's call:
 * only its own id releases or renews it. One sorted set per scope, member = lease id, score =
 * expiry on Redis server time; at most `limit` members, expired ones trimmed 8 per call; the
 * key expires with its last lease.
 *
 * Redis cost per decision: TIME, ZCOUNT, a ZREMRANGEBYRANK of at most 8 expired members, a
 * ZRANGEBYSCORE of at most 8 members scored too far ahead, ZCARD, ZSCORE; ZADD and PEXPIRE
 * when it admits or renews; a ZRANGE or two to report the expiries.
 */
import { randomUUID } from 'node:crypto';
import { InvalidInputError } from '../errors.js';
import type { Policy } from '../types.js';
import {
  buildPolicy,
  MAX_WINDOW_MS,
  type PolicyIdentityOptions,
  policyIdentity,
  policyInteger,
  requireObject,
} from './policy.js';
import { loadScript } from './script.js';
import { type LogEntry, zadd } from './sliding-window-log.js';
import { numbers, type Twin } from './twin.js';

/** The concurrency script (one key). */
export const concurrencyScript = loadScript('concurrency', import.meta.url, 1);

/** Largest `limit` of a concurrency policy: up to `limit` members per key in Redis. */
export const MAX_CONCURRENCY_LIMIT = 10_000;

/** Options of {@link concurrency}. */
export interface ConcurrencyOptions extends PolicyIdentityOptions {
  /** Leases held at once per scope: an integer from 1 to 10,000. */
  readonly limit: number;
  /**
   * A lease's life in ms, from its acquisition or last renewal: an integer from 100
   * ({@link MIN_LEASE_MS}) to 315,360,000,000; prefer seconds. A holder that neither releases nor renews it (crashed, paused) loses
   * it then, and its slot is free.
   */
  readonly leaseMs: number;
}

/** A concurrency policy, made by {@link concurrency}. */
export interface ConcurrencyPolicy extends Policy {
  readonly algorithm: 'concurrency';
  readonly leaseMs: number;
}

/** What a lease call does: acquire, release, renew (`ARGV[4]` of `concurrency.lua`). */
export type LeaseAction = 'a' | 'l' | 'n';

/**
 * The shortest `leaseMs` accepted: a lease is renewed every half lease, and a renewal must
 * arrive in time through a round trip and the event loop's stalls (a few ms to tens of ms on
 * a busy host). Shorter leases expire under their holders.
 */
export const MIN_LEASE_MS = 100;

/** The longest lease id accepted, in characters. */
export const MAX_LEASE_ID_LENGTH = 128;
const LEASE_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * Builds a concurrency policy.
 *
 * Decision fields (of an acquisition): `allowed` = the lease is held; `remaining` = free
 * slots after it; `limit` = the policy's limit; `resetMs` = ms until every lease held now has
 * expired (when admitted: `leaseMs`, the lease's own life); `retryAfterMs` = ms until the
 * earliest lease held expires (a release may free a slot sooner). A lease holds one slot:
 * a cost other than 1 on a concurrency item is an `InvalidInputError` (`takeAll`, `peek`,
 * `wait`, the HTTP guard, policy files).
 *
 * @throws {InvalidInputError} for a bad `policy.limit` (above 10,000 too), `policy.leaseMs`,
 *   `policy.name` or `policy.version`, and for a `policy.blockMs` (blocks are for rate
 *   policies).
 */
export function concurrency(options: ConcurrencyOptions): ConcurrencyPolicy {
  requireObject(options, '{ limit, leaseMs }', ['limit', 'leaseMs']);
  const limit = policyInteger(options, 'limit', MAX_CONCURRENCY_LIMIT);
  const leaseMs = policyInteger(options, 'leaseMs', MAX_WINDOW_MS);
  if (leaseMs < MIN_LEASE_MS) {
    throw new InvalidInputError(
      'policy.leaseMs',
      `an integer from ${MIN_LEASE_MS} to ${MAX_WINDOW_MS} (a shorter lease cannot be kept by renewal)`,
      leaseMs,
    );
  }
  const { name, version, block } = policyIdentity(options);
  if (block !== undefined) {
    // A lease is refused while the scope is full and admitted as soon as one is released:
    // a block that outlasts the leases has no meaning here.
    throw new InvalidInputError(
      'policy.blockMs',
      'no blockMs on a concurrency policy',
      block.blockMs,
    );
  }
  return buildPolicy(
    {
      name,
      summary: `${limit}-for-${leaseMs}ms`,
      horizonMs: leaseMs,
      algorithm: 'concurrency',
      keyTag: 'cc',
      limit,
      version,
      maxCost: 1,
      script: concurrencyScript,
      quotaWindowMs: leaseMs,
      params: [limit, leaseMs],
      // A take (a takeAll item, a peek) acquires a lease of a fresh id.
      tail: () => ['a', randomUUID()],
      // A release may free a slot at any moment: no denial is certain for any time.
      cacheDenials: false,
    },
    { algorithm: 'concurrency' as const, leaseMs },
  );
}

/** True for a policy made by {@link concurrency}. */
export function isConcurrency(policy: Policy): policy is ConcurrencyPolicy {
  return policy.script === concurrencyScript;
}

/** The ARGV of a lease call of `policy` on the lease `id`. */
export function leaseArgs(
  policy: ConcurrencyPolicy,
  action: LeaseAction,
  id: string,
): readonly string[] {
  return [String(policy.limit), String(policy.leaseMs), '1', action, id];
}

/** The lease id of a take of a concurrency policy (its ARGV[5]). */
export function leaseIdOf(args: readonly string[]): string {
  return args[4] as string;
}

/**
 * Checks a lease id: 1 to 128 printable ASCII characters without spaces.
 *
 * @throws {InvalidInputError} naming `field`
 */
export function checkLeaseId(field: string, id: unknown): string {
  if (typeof id === 'string' && LEASE_ID.test(id)) return id;
  throw new InvalidInputError(
    field,
    `a lease id: 1 to ${MAX_LEASE_ID_LENGTH} printable ASCII characters, no spaces`,
    id,
  );
}

/** Expired members one call removes at most (`TRIM` in `concurrency.lua`). */
const TRIM = 8;

/** The in-memory twin of `concurrency.lua` (see `twin.ts`). */
export const concurrencyTwin: Twin = (state, key, args, { dry, probe }) => {
  const [limit, lease, given] = numbers(args, 3);
  const action = args[3];
  const id = args[4] as string;
  const cost = probe ? limit + 1 : given;
  const now = state.nowMs;
  const expiry = now + lease;
  const set = state.get<LogEntry[]>(key, 'zset');
  const members: LogEntry[] = set ?? [];
  const write = (): void => {
    if (members.length === 0) state.delete(key);
  };

  let stale = members.filter((e) => e[0] <= now).length;
  if (stale > 0 && !dry) {
    const removed = Math.min(stale, TRIM);
    members.splice(0, removed);
    write();
    stale -= removed;
  }
  if (!dry) {
    const ahead = members.filter((e) => e[0] > expiry).slice(0, TRIM);
    for (const [, member] of ahead) zadd(members, expiry, member);
  }
  let live = members.length - stale;

  const reset = (): number => {
    if (live <= 0) return 0;
    const top = (members[members.length - 1] as LogEntry)[0];
    return Math.ceil(Math.min(top, expiry) - now);
  };
  const checkTtl = (): void => {
    if (dry) return;
    const ttl = state.pttl(key);
    if (ttl === -1 || ttl > lease) state.pexpire(key, lease);
  };
  const hold = (): void => {
    if (state.pttl(key) === -2) state.set(key, 'zset', [[expiry, id]], lease);
    else {
      zadd(members, expiry, id);
      state.pexpire(key, lease);
    }
  };
  const remove = (member: string): void => {
    members.splice(
      members.findIndex((e) => e[1] === member),
      1,
    );
    write();
  };

  const own = members.find((e) => e[1] === id)?.[0];
  const held = own !== undefined && own > now;

  if (action === 'l') {
    if (own !== undefined && !dry) remove(id);
    if (held) live--;
    checkTtl();
    return [held ? 1 : 0, Math.max(limit - live, 0), reset(), 0];
  }
  if (action === 'n') {
    if (held) {
      if (!dry) hold();
      return [1, Math.max(limit - live, 0), lease, 0];
    }
    if (own !== undefined && !dry) {
      remove(id);
      stale--;
    }
    checkTtl();
    return [0, Math.max(limit - live, 0), reset(), -1];
  }
  if (cost > 1) {
    checkTtl();
    return [0, Math.max(limit - live, 0), reset(), -1];
  }
  if (held) {
    if (dry) return [1, Math.max(limit - live, 0), reset(), 0];
    hold();
    return [1, Math.max(limit - live, 0), lease, 0];
  }
  if (live >= limit) {
    checkTtl();
    const first = (members[stale] as LogEntry)[0];
    return [0, 0, reset(), Math.ceil(Math.min(first, expiry) - now)];
  }
  if (dry) return [1, limit - live, reset(), 0];
  hold();
  return [1, limit - live - 1, lease, 0];
};
