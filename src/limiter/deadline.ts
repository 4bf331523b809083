/**
 * Deadlines for many calls with one timer.
 *
 * Every call of a limiter has the same timeout, so deadlines arrive in the order the calls
 * started: a FIFO queue is already sorted. One timer is armed for the oldest pending call;
 * when it fires, every expired call is expired and the timer re-armed for the next one.
 * A call that settles normally is only marked, and dropped when the sweep reaches it. Cost
 * per call: one queue slot; no timer is created or cleared per call.
 *
 * The deadline bounds the *caller's* wait, whatever the Redis client does with the command
 * (node-redis stops honouring an abort signal once a command is written to the socket).
 * It cannot unsend a command: a call that timed out may still have run on the server.
 *
 * The timer keeps the process alive only while some call is unsettled, so a caller's
 * promise always settles, and an idle limiter never delays process exit.
 */
import { performance } from 'node:perf_hooks';
import { TimeoutError } from '../errors.js';

/** A call tracked by a {@link DeadlineQueue}. */
export interface DeadlineEntry {
  /** `performance.now()` value after which the call expires; set by `track`. */
  deadline: number;
  /** True once the call settled, by its work or by expiry. */
  settled: boolean;
  /** Called once, when the deadline passes while the call is unsettled (`settled` is already true). */
  expire(): void;
}

/** Compact the queue's array once this many settled slots lead it. */
const COMPACT_AT = 1024;

export class DeadlineQueue {
  readonly #timeoutMs: number;
  #queue: DeadlineEntry[] = [];
  #head = 0;
  #timer: NodeJS.Timeout | undefined;
  #unsettled = 0;
  readonly #sweep = () => this.#expire();

  /** @param timeoutMs the deadline of every call, in milliseconds (> 0). */
  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  /** The deadline of every call, in milliseconds. */
  get timeoutMs(): number {
    return this.#timeoutMs;
  }

  /** Calls not yet settled. */
  get size(): number {
    return this.#unsettled;
  }

  /** Starts the clock of `entry`: it expires `timeoutMs` from now unless settled first. */
  track(entry: DeadlineEntry, now: number = performance.now()): void {
    entry.deadline = now + this.#timeoutMs;
    entry.settled = false;
    this.#queue.push(entry);
    if (++this.#unsettled === 1) this.#timer?.ref();
    if (this.#timer === undefined) this.#arm(this.#timeoutMs);
  }

  /**
   * Marks `entry` settled by its work. Returns false when it had already settled (expired),
   * in which case the caller must not settle it again.
   */
  settle(entry: DeadlineEntry): boolean {
    if (entry.settled) return false;
    entry.settled = true;
    if (--this.#unsettled === 0) this.#timer?.unref();
    // Calls mostly settle in the order they started: drop settled entries from the head
    // now rather than at the next sweep, so that a settled call is garbage at once instead
    // of surviving (and being promoted by) the young-generation collections of a deadline.
    const queue = this.#queue;
    let head = this.#head;
    if (queue[head] === entry) {
      do {
        queue[head] = undefined as unknown as DeadlineEntry;
        head++;
      } while (head < queue.length && (queue[head] as DeadlineEntry).settled);
      if (head === queue.length) {
        queue.length = 0;
        head = 0;
      } else if (head >= COMPACT_AT && head * 2 >= queue.length) {
        this.#queue = queue.slice(head);
        head = 0;
      }
      this.#head = head;
    }
    return true;
  }

  /**
   * Settles like `work`, or rejects with {@link TimeoutError} when `timeoutMs` passes
   * first (whichever happens first wins; the other is ignored).
   */
  race<T>(work: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timeoutMs = this.#timeoutMs;
      const entry: DeadlineEntry = {
        deadline: 0,
        settled: false,
        expire: () => reject(new TimeoutError(timeoutMs)),
      };
      this.track(entry);
      work.then(
        (value) => {
          if (this.settle(entry)) resolve(value);
        },
        (error: unknown) => {
          if (this.settle(entry)) reject(error);
        },
      );
    });
  }

  #arm(delayMs: number): void {
    this.#timer = setTimeout(this.#sweep, Math.max(1, Math.ceil(delayMs)));
    if (this.#unsettled === 0) this.#timer.unref();
  }

  #expire(): void {
    this.#timer = undefined;
    const now = performance.now();
    // Expire from the head; `settle` drops each settled head entry (and any settled ones
    // behind it), so the head is always the oldest unsettled call.
    while (this.#head < this.#queue.length) {
      const entry = this.#queue[this.#head] as DeadlineEntry;
      // Timers may fire up to ~1 ms early against the monotonic clock.
      if (entry.deadline > now + 1) {
        this.#arm(entry.deadline - now);
        return;
      }
      this.settle(entry);
      entry.expire();
    }
  }
}
