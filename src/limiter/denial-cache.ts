/**
 * The local denial cache (timed on the store's clock: the process's monotonic clock for
 * Redis, the injected clock of a `MemoryStore`): a scope whose quota is used up until a known time is answered
 * "denied" in process until then, without a Redis round trip, so an abusive hot tenant
 * stops costing Redis work.
 *
 * Exact where the policy says so: a policy reports, for a decision, how long *every* take
 * on that key is certain to be denied (the fixed window: `remaining = 0` holds until the
 * window ends, since nothing un-spends quota inside a window). The hold is anchored at the
 * time the request was *sent* (before Redis decided), so the cached denial never outlives
 * the real one; the `retryAfterMs` it reports is anchored at the time the reply *arrived*,
 * so a client that waits it out is never early.
 *
 * Bounded: at most `maxEntries` keys; expired entries are dropped first, then the oldest.
 */
export interface CachedDenial {
  /** `performance.now()` until which every take on the key is denied. */
  readonly until: number;
  /** `performance.now()` after which a retry succeeds (for `retryAfterMs`). */
  readonly retryAt: number;
  /** `performance.now()` at which the window ends (for `resetMs`). */
  readonly resetAt: number;
  /** The policy limit the denial was decided under (the `limit` a cached decision reports). */
  readonly limit: number;
  /** True when `retryAt` holds for every cost; else only for a cost of 1. */
  readonly anyCost: boolean;
}

export class DenialCache {
  readonly #maxEntries: number;
  readonly #entries = new Map<string, CachedDenial>();

  constructor(maxEntries: number) {
    this.#maxEntries = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The live denial for `key`, dropping an expired one. */
  get(key: string, now: number): CachedDenial | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.until > now) return entry;
    this.#entries.delete(key);
    return undefined;
  }

  /** Drops the denial for `key`, if any. */
  delete(key: string): void {
    this.#entries.delete(key);
  }

  /** Drops every denial. */
  clear(): void {
    this.#entries.clear();
  }

  set(key: string, entry: CachedDenial, now: number): void {
    if (this.#entries.size >= this.#maxEntries && !this.#entries.has(key)) this.#makeRoom(now);
    this.#entries.set(key, entry);
  }

  #makeRoom(now: number): void {
    for (const [key, entry] of this.#entries) {
      if (entry.until <= now) this.#entries.delete(key);
    }
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
  }
}
