/**
 * Deadlines for many calls with one timer.
 *
 * Every call of a limiter has the same timeout, so deadlines arrive in the order the calls
 * started: a FIFO queue is already sorted. One timer is armed for the oldest pending call;
 * when it fires, every expired call is rejected and the timer re-armed for the next one.
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
import { TimeoutError } from './errors.js';

interface Pending {
  readonly deadline: number;
  settled: boolean;
  readonly reject: (error: Error) => void;
}

/** Compact the queue's array once this many settled slots lead it. */
const COMPACT_AT = 1024;

export class DeadlineQueue {
  readonly #timeoutMs: number;
  #queue: Pending[] = [];
  #head = 0;
  #timer: NodeJS.Timeout | undefined;
  /** Calls not yet settled (the queue may also hold settled ones not yet swept). */
  #unsettled = 0;
  readonly #sweep = () => this.#expire();

  /** @param timeoutMs the deadline of every call, in milliseconds (> 0). */
  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  /** Calls waiting for their work or their deadline. */
  get size(): number {
    return this.#unsettled;
  }

  /**
   * Settles like `work`, or rejects with {@link TimeoutError} when `timeoutMs` passes
   * first (whichever happens first wins; the other is ignored).
   */
  race<T>(work: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = {
        deadline: performance.now() + this.#timeoutMs,
        settled: false,
        reject,
      };
      this.#queue.push(entry);
      if (++this.#unsettled === 1) this.#timer?.ref();
      if (this.#timer === undefined) this.#arm(this.#timeoutMs);
      work.then(
        (value) => {
          if (entry.settled) return;
          this.#settle(entry);
          resolve(value);
        },
        (error: unknown) => {
          if (entry.settled) return;
          this.#settle(entry);
          reject(error);
        },
      );
    });
  }

  #settle(entry: Pending): void {
    entry.settled = true;
    if (--this.#unsettled === 0) this.#timer?.unref();
  }

  #arm(delayMs: number): void {
    this.#timer = setTimeout(this.#sweep, Math.max(1, Math.ceil(delayMs)));
    if (this.#unsettled === 0) this.#timer.unref();
  }

  #expire(): void {
    this.#timer = undefined;
    const now = performance.now();
    const queue = this.#queue;
    let head = this.#head;
    while (head < queue.length) {
      const entry = queue[head] as Pending;
      if (!entry.settled) {
        // Timers may fire up to ~1 ms early against the monotonic clock.
        if (entry.deadline > now + 1) break;
        this.#settle(entry);
        entry.reject(new TimeoutError(this.#timeoutMs));
      }
      head++;
    }
    if (head === queue.length) {
      this.#queue = [];
      this.#head = 0;
      return;
    }
    if (head >= COMPACT_AT && head * 2 >= queue.length) {
      this.#queue = queue.slice(head);
      head = 0;
    }
    this.#head = head;
    this.#arm((this.#queue[head] as Pending).deadline - now);
  }
}
