/**
 * The local denial cache and what keeps it honest: a scope whose quota is used up until a
 * known time is denied in process until then, with no Redis call, where that is exact for
 * its policy (see `denial-cache.ts`); and the reset epoch (see `reset-epoch.ts`), read
 * while cached denials are answered, so that a `reset` by any limiter sharing the Redis
 * stops them within `EPOCH_VALID_MS`.
 */
import { callSafely } from '../call-safely.js';
import { UnavailableError } from '../errors.js';
import type { ScriptStore } from '../stores/store.js';
import type { Decision, Policy } from '../types.js';
import { DenialCache } from './denial-cache.js';
import {
  EPOCH_POLL_MS,
  EPOCH_TTL_MS,
  EPOCH_VALID_MS,
  newEpochToken,
  resetEpochScript,
} from './reset-epoch.js';
import type { LimiterStats } from './stats.js';
import type { Target } from './targets.js';

export class LocalDenials {
  readonly #store: ScriptStore;
  readonly #epochKey: string;
  readonly #cache: DenialCache | undefined;
  readonly #stats: LimiterStats;
  /** The store's clock (ms), which times the cache. */
  readonly clock: () => number;

  /** The reset epoch token last read (undefined before the first read). */
  #epoch: string | undefined;
  /** When the read that confirmed `#epoch` was sent (clock ms). */
  #epochConfirmedAt = Number.NEGATIVE_INFINITY;
  /** When the last epoch read was sent, and its sequence number. */
  #epochReadAt = Number.NEGATIVE_INFINITY;
  #epochRead = 0;
  #epochReading = false;
  /** Denials decided by calls sent before this time are not cached (see reset-epoch.ts). */
  #epochFloor = Number.NEGATIVE_INFINITY;

  /** @param maxEntries the cache's bound; undefined: no cache (the epoch is still written). */
  constructor(
    store: ScriptStore,
    epochKey: string,
    maxEntries: number | undefined,
    clock: () => number,
    stats: LimiterStats,
  ) {
    this.#store = store;
    this.#epochKey = epochKey;
    this.#cache = maxEntries === undefined ? undefined : new DenialCache(maxEntries);
    this.clock = clock;
    this.#stats = stats;
  }

  /** True when this limiter caches denials. */
  get enabled(): boolean {
    return this.#cache !== undefined;
  }

  /**
   * A cached denial for a take of `target` (its scope, policy and cost), if one is held. Its
   * `localKey` is read only when something is cached: building it is a take's largest cost
   * when nothing is.
   */
  held(target: Target): Decision | undefined {
    const cache = this.#cache;
    if (cache === undefined || cache.size === 0) return undefined;
    const { policy, cost } = target;
    const now = this.clock();
    const held = cache.get(target.localKey, now);
    if (held === undefined || !(held.anyCost || cost === 1 || cost > policy.maxCost)) {
      return undefined;
    }
    if (!this.#epochFresh(now)) return undefined;
    const decision: Decision = {
      allowed: false,
      remaining: 0,
      limit: held.limit,
      resetMs: Math.max(0, Math.ceil(held.resetAt - now)),
      retryAfterMs:
        cost > policy.maxCost
          ? Number.POSITIVE_INFINITY
          : Math.max(1, Math.ceil(held.retryAt - now)),
    };
    // A policy with blocks caches only its blocks (see `buildPolicy`).
    return policy.block === undefined ? decision : { ...decision, blocked: true };
  }

  /**
   * Sends the first reset-epoch read, once, with the limiter's first call: denials decided
   * by calls sent from then on can be cached as soon as it returns.
   */
  start(): void {
    if (this.#cache !== undefined && this.#epochRead === 0) this.#readEpoch(this.clock());
  }

  /** Caches what `decision` makes certain (see `Policy.denialHold`). */
  remember(
    policy: Policy,
    localKey: string,
    cost: number,
    decision: Decision,
    sentAt: number,
    dry: boolean,
  ): void {
    const cache = this.#cache;
    if (cache === undefined || (dry && decision.allowed) || sentAt < this.#epochFloor) return;
    const hold = policy.denialHold(decision, cost);
    if (hold === undefined) return;
    const now = this.clock();
    // Have the epoch confirmed by the time the next take on this scope comes.
    if (now - this.#epochReadAt >= EPOCH_POLL_MS && !this.#epochReading) this.#readEpoch(now);
    cache.set(
      localKey,
      {
        until: sentAt + hold.ms,
        resetAt: now + decision.resetMs,
        // A block's wait may outlast it (the algorithm's own, see block.lua): the later.
        retryAt:
          now +
          Math.max(hold.ms + 1, Number.isFinite(decision.retryAfterMs) ? decision.retryAfterMs : 0),
        limit: decision.limit,
        anyCost: hold.anyCost,
      },
      now,
    );
  }

  /** Drops the cached denial of one scope (this limiter reset it). */
  forget(localKey: string): void {
    this.#cache?.delete(localKey);
  }

  /** Stores a new reset epoch: every limiter sharing the Redis drops its cached denials. */
  announceReset(): Promise<unknown> {
    return callSafely(
      () =>
        this.#store.evalScript(
          resetEpochScript,
          [this.#epochKey],
          [newEpochToken(), String(EPOCH_TTL_MS)],
        ),
      () => new UnavailableError('the store returned no promise'),
    );
  }

  /** True while the reset epoch was confirmed recently enough to answer from the cache. */
  #epochFresh(now: number): boolean {
    const stale = now - this.#epochReadAt;
    if (stale >= EPOCH_POLL_MS && (!this.#epochReading || stale > EPOCH_VALID_MS)) {
      this.#readEpoch(now);
    }
    return now - this.#epochConfirmedAt <= EPOCH_VALID_MS;
  }

  #readEpoch(sentAt: number): void {
    const read = ++this.#epochRead;
    this.#epochReading = true;
    this.#epochReadAt = sentAt;
    callSafely(
      () => this.#store.evalScript(resetEpochScript, [this.#epochKey], ['', '0']),
      () => new UnavailableError('the store returned no promise'),
    ).then(
      (reply) => {
        if (read !== this.#epochRead) return; // a newer read was sent since
        this.#epochReading = false;
        const token = typeof reply === 'string' ? reply : String(reply ?? '');
        if (token !== this.#epoch) {
          // A reset happened (or this is the first read): what was cached may predate it.
          if (this.#epoch !== undefined) this.#stats.cacheInvalidations++;
          this.#cache?.clear();
          this.#epochFloor = sentAt;
          this.#epoch = token;
        }
        this.#epochConfirmedAt = sentAt;
      },
      () => {
        if (read === this.#epochRead) this.#epochReading = false;
      },
    );
  }
}
