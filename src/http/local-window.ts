/**
 * A per-process fixed-window counter: the local fallback limit of fail-open routes, so that
 * a Redis outage cannot pass unlimited traffic to what the limiter protects. It is
 * per replica, not shared: with N replicas up to N × `limit` pass per window.
 *
 * Memory is bounded by `maxKeys`: expired windows are dropped first, then the oldest.
 */
export class LocalWindow {
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #maxKeys: number;
  readonly #windows = new Map<string, { count: number; resetAt: number }>();

  constructor(limit: number, windowMs: number, maxKeys = 10_000) {
    this.#limit = limit;
    this.#windowMs = windowMs;
    this.#maxKeys = maxKeys;
  }

  /** Admits `cost` units for `key` when they fit in its current local window. */
  take(key: string, cost: number, now = Date.now()): boolean {
    let window = this.#windows.get(key);
    if (window === undefined || window.resetAt <= now) {
      if (window !== undefined) this.#windows.delete(key);
      this.#makeRoom(now);
      window = { count: 0, resetAt: now + this.#windowMs };
      this.#windows.set(key, window);
    }
    if (window.count + cost > this.#limit) return false;
    window.count += cost;
    return true;
  }

  /** Keys tracked now. */
  get size(): number {
    return this.#windows.size;
  }

  #makeRoom(now: number): void {
    if (this.#windows.size < this.#maxKeys) return;
    for (const [key, window] of this.#windows) {
      if (window.resetAt <= now) this.#windows.delete(key);
    }
    while (this.#windows.size >= this.#maxKeys) {
      const oldest = this.#windows.keys().next().value as string;
      this.#windows.delete(oldest);
    }
  }
}
