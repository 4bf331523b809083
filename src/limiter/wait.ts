/**
 * `wait` and `schedule`: waiting for a slot instead of being refused.
 *
 * The waiters of one scope and policy in one limiter form a queue, served in arrival order.
 * Only the first in line asks Redis: a take (or, for a concurrency policy, an acquisition of
 * its lease); the others send nothing while they wait. When it is refused, the queue sleeps
 * until the time the script gave (`retryAfterMs`: exact for the rate policies) plus a jitter
 * of up to 5 % (at most 10 ms) so that the queues of many processes do not all ask at one
 * instant, then asks again; when it is admitted, the next in line asks at once. A
 * concurrency policy's `retryAfterMs` is the earliest expiry, but a release usually frees a
 * slot sooner: its queue asks again after the shorter of that and a backoff that starts at
 * 5 ms and doubles up to 1 s, and at once when this limiter releases a lease of the scope.
 * So a saturated queue makes about one Redis call per admission, whatever its length.
 *
 * Bounds: a waiter is answered by its `maxWaitMs`, never later — refused (`allowed: false`,
 * the last denial seen) when it was not admitted by then, or at once when a rate policy's
 * exact `retryAfterMs` already lands past it. An admission that arrives for a waiter already
 * answered (its deadline passed, its signal fired, while its call was in flight) goes to the
 * next in line when it asked for the same cost, else is lost (a lease: released at once). At
 * most `maxWaiters` wait in one limiter; one more is refused at once, without a Redis call.
 *
 * Order across processes is best effort: each process serves its own waiters in order, and
 * the first in line of each process competes with the others' at Redis, where the first call
 * to arrive after a slot frees wins it.
 */
import { type ConcurrencyPolicy, isConcurrency } from '../algorithms/concurrency.js';
import { InvalidInputError } from '../errors.js';
import type { WaitOutcome } from '../metrics/types.js';
import type { Decision, Lease, Policy, Scope, TakeOptions } from '../types.js';
import { onlyKnownKeys, readProperty } from '../validate.js';
import type { DecisionReporter } from './events.js';
import { keepLease } from './lease-keeper.js';
import type { Leases } from './leases.js';
import type { LimiterStats } from './stats.js';
import type { Target, TargetMaker } from './targets.js';

/** Options of `wait` and `schedule`. */
export interface WaitOptions {
  /**
   * The longest wait, in ms: an integer from 0 to 2,147,483,647. 0: one attempt, when no
   * other waiter of the scope is ahead in this limiter.
   */
  readonly maxWaitMs: number;
  /** Units to take (rate policies): a positive safe integer. Default 1. */
  readonly cost?: number;
  /** Rejects the wait with an `AbortError` when it fires (nothing is taken after it). */
  readonly signal?: AbortSignal;
  /** A concurrency policy's lease id (see `AcquireOptions.id`). */
  readonly id?: string;
  /** As in `TakeOptions`: passed through to decision events. */
  readonly requestId?: string;
}

/** The outcome of `schedule`: `fn`'s value when it ran, else the refusal. */
export type Scheduled<T> =
  | { readonly admitted: true; readonly value: T; readonly decision: Decision }
  | { readonly admitted: false; readonly decision: Decision };

/** What the waits need from the limiter. */
export interface WaitPath {
  readonly targets: TargetMaker;
  readonly leases: Leases;
  readonly stats: LimiterStats;
  readonly maxWaiters: number;
  /** A take of a validated target. */
  take(target: Target, requestId: string | undefined): Promise<Decision>;
  /** Where wait outcomes are reported; undefined when nothing observes the limiter. */
  readonly reporter: DecisionReporter | undefined;
}

const WAIT_KEYS: readonly string[] = ['maxWaitMs', 'cost', 'signal', 'id', 'requestId'];
const MAX_WAIT_MS = 2_147_483_647;
const FIRST_BACKOFF_MS = 5;
const MAX_BACKOFF_MS = 1000;

interface Waiter {
  readonly target: Target;
  /** `performance.now()` when it started waiting. */
  readonly startedAt: number;
  readonly lease: boolean;
  readonly requestId: string | undefined;
  readonly deadline: number;
  readonly resolve: (value: Decision) => void;
  readonly reject: (error: unknown) => void;
  done: boolean;
  timer: ReturnType<typeof setTimeout> | undefined;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

interface Queue {
  readonly key: string;
  readonly waiters: Waiter[];
  /** The waiter whose attempt is in flight. */
  asking: Waiter | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  backoffMs: number;
  lastDenial: Decision | undefined;
  /** A lease of the scope was released while a call was in flight: a refusal asks again at once. */
  woken: boolean;
}

export class Waits {
  readonly #path: WaitPath;
  readonly #queues = new Map<string, Queue>();

  constructor(path: WaitPath) {
    this.#path = path;
    path.leases.onReleased = (key) => this.#wake(key);
  }

  wait(scope: Scope, policy: Policy, options: WaitOptions): Promise<Decision> {
    let target: Target;
    let maxWaitMs: number;
    let signal: AbortSignal | undefined;
    let requestId: string | undefined;
    const stats = this.#path.stats;
    try {
      if (typeof options !== 'object' || options === null) {
        throw new InvalidInputError('options', 'an object such as { maxWaitMs }', options);
      }
      onlyKnownKeys(options, WAIT_KEYS, 'options');
      maxWaitMs = readMaxWait(readProperty(options, 'maxWaitMs', 'options'));
      signal = readSignal(readProperty(options, 'signal', 'options'));
      requestId = readProperty(options, 'requestId', 'options') as string | undefined;
      const id = readProperty(options, 'id', 'options') as string | undefined;
      const cost = readProperty(options, 'cost', 'options') as number | undefined;
      const take: TakeOptions = { cost, requestId };
      if (isPolicyOfLeases(policy)) {
        if (cost !== undefined && cost !== 1) {
          throw new InvalidInputError('options.cost', '1 (a lease holds one slot)', cost);
        }
        target = this.#path.leases.target(scope, policy, id);
      } else {
        if (id !== undefined) {
          throw new InvalidInputError('options.id', 'no id (a rate policy holds no lease)', id);
        }
        target = this.#path.targets.one(scope, policy, take, 'scope', 'policy', 'options');
      }
    } catch (error) {
      stats.invalid++;
      return Promise.reject(error);
    }
    const lease = isConcurrency(target.policy);
    const startedAt = performance.now();
    if (signal?.aborted) {
      this.#count('aborted', target, startedAt);
      return Promise.reject(abortError(signal));
    }
    if (stats.waiting >= this.#path.maxWaiters) {
      this.#count('overflow', target, startedAt);
      return Promise.resolve(this.#refusal(target, lease, undefined));
    }
    return new Promise<Decision>((resolve, reject) => {
      const waiter: Waiter = {
        target,
        startedAt,
        lease,
        requestId,
        deadline: startedAt + maxWaitMs,
        resolve,
        reject,
        done: false,
        timer: undefined,
        signal,
        onAbort: undefined,
      };
      stats.waiting++;
      const key = target.key;
      let queue = this.#queues.get(key);
      if (queue === undefined) {
        queue = {
          key,
          waiters: [],
          asking: undefined,
          timer: undefined,
          backoffMs: FIRST_BACKOFF_MS,
          lastDenial: undefined,
          woken: false,
        };
        this.#queues.set(key, queue);
      }
      const first = queue.waiters.length === 0;
      queue.waiters.push(waiter);
      const q = queue;
      if (maxWaitMs > 0 || !first) {
        waiter.timer = setTimeout(() => this.#timeOut(q, waiter), maxWaitMs);
      }
      if (signal !== undefined) {
        waiter.onAbort = () => this.#abort(q, waiter);
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#run(queue);
    });
  }

  async schedule<T>(
    scope: Scope,
    policy: Policy,
    fn: (decision: Decision, signal: AbortSignal) => T | PromiseLike<T>,
    options: WaitOptions,
  ): Promise<Scheduled<T>> {
    if (typeof fn !== 'function') {
      this.#path.stats.invalid++;
      throw new InvalidInputError('fn', 'a function', fn);
    }
    const decision = await this.wait(scope, policy, options);
    if (!decision.allowed) return { admitted: false, decision };
    const lost = new AbortController();
    if (!isPolicyOfLeases(policy)) {
      return { admitted: true, value: await fn(decision, lost.signal), decision };
    }
    const held = decision as Lease;
    let released = false;
    // fn's own release() counts: schedule does not release it a second time (no leasesLost).
    const lease: Lease = Object.freeze({
      ...held,
      release: () => {
        released = true;
        stop();
        return held.release();
      },
    });
    const stop = keepLease(held, policy.leaseMs, () =>
      lost.abort(new Error('the lease was lost: a renewal was refused or came too late')),
    );
    try {
      return { admitted: true, value: await fn(lease, lost.signal), decision: lease };
    } finally {
      stop();
      // It expires by itself when this fails.
      if (!released) await held.release().catch(() => false);
    }
  }

  /** Asks Redis for the first in line, unless a call or a sleep is already under way. */
  #run(queue: Queue): void {
    if (queue.asking !== undefined || queue.timer !== undefined) return;
    let head = this.#head(queue);
    // A waiter whose deadline passed before its turn (its timer not yet run) is refused now.
    while (head !== undefined && pastDeadline(head)) {
      this.#timeOut(queue, head);
      head = this.#head(queue);
    }
    if (head === undefined) return;
    queue.asking = head;
    const asked = head.lease
      ? this.#path.leases.acquireTarget(head.target, head.requestId)
      : this.#path.take(head.target, head.requestId);
    asked.then(
      (decision) => this.#answered(queue, head, decision),
      (error: unknown) => {
        queue.asking = undefined;
        if (!head.done) this.#finish(queue, head, () => head.reject(error));
        this.#run(queue);
      },
    );
  }

  #answered(queue: Queue, asked: Waiter, decision: Decision): void {
    queue.asking = undefined;
    if (decision.allowed) {
      queue.backoffMs = FIRST_BACKOFF_MS;
      let taker: Waiter | undefined = asked;
      if (!asked.done && pastDeadline(asked)) {
        // Its timer is late (a busy event loop): answered as at its deadline, never later.
        this.#timeOut(queue, asked);
      }
      if (asked.done) {
        // Answered already: the admission goes to the next in line if it fits it.
        const next = this.#head(queue);
        taker =
          next !== undefined && !asked.lease && next.target.cost === asked.target.cost
            ? next
            : undefined;
        if (taker === undefined && asked.lease) (decision as Lease).release().catch(() => false);
      }
      if (taker !== undefined) {
        const w = taker;
        this.#count('granted', w.target, w.startedAt);
        this.#finish(queue, w, () => w.resolve(decision));
      }
      this.#run(queue);
      return;
    }
    queue.lastDenial = decision;
    const now = performance.now();
    const exact = !asked.lease;
    if (!asked.done) {
      const never = !Number.isFinite(decision.retryAfterMs);
      // Past its deadline (maxWaitMs 0: its one attempt; else a timer the event loop delayed).
      const late = now >= asked.deadline;
      if (never || late || (exact && now + decision.retryAfterMs > asked.deadline)) {
        this.#count('timed_out', asked.target, asked.startedAt);
        this.#finish(queue, asked, () => asked.resolve(decision));
        this.#run(queue);
        return;
      }
    }
    let delay = decision.retryAfterMs;
    if (!exact) {
      delay = queue.woken ? 0 : Math.min(delay, queue.backoffMs);
      queue.backoffMs = Math.min(queue.backoffMs * 2, MAX_BACKOFF_MS);
    }
    queue.woken = false;
    delay += Math.random() * Math.min(delay * 0.05, 10);
    queue.timer = setTimeout(() => {
      queue.timer = undefined;
      this.#run(queue);
    }, delay);
    // Nothing left to wait for: no queue keeps a process alive once its waiters are answered.
    if (this.#head(queue) === undefined) this.#drop(queue);
  }

  /** The first waiter still waiting (answered ones are dropped from the front). */
  #head(queue: Queue): Waiter | undefined {
    const waiters = queue.waiters;
    while (waiters.length > 0 && (waiters[0] as Waiter).done) waiters.shift();
    if (waiters.length === 0 && queue.asking === undefined) this.#drop(queue);
    return waiters[0];
  }

  #drop(queue: Queue): void {
    if (queue.timer !== undefined) clearTimeout(queue.timer);
    queue.timer = undefined;
    if (this.#queues.get(queue.key) === queue) this.#queues.delete(queue.key);
  }

  #timeOut(queue: Queue, waiter: Waiter): void {
    if (waiter.done) return;
    this.#count('timed_out', waiter.target, waiter.startedAt);
    this.#finish(queue, waiter, () =>
      waiter.resolve(this.#refusal(waiter.target, waiter.lease, queue.lastDenial)),
    );
    this.#head(queue);
  }

  #abort(queue: Queue, waiter: Waiter): void {
    if (waiter.done) return;
    this.#count('aborted', waiter.target, waiter.startedAt);
    this.#finish(queue, waiter, () => waiter.reject(abortError(waiter.signal as AbortSignal)));
    this.#head(queue);
  }

  /** Answers a waiter once: its timer and listener gone, no longer counted as waiting. */
  #finish(queue: Queue, waiter: Waiter, answer: () => void): void {
    waiter.done = true;
    this.#path.stats.waiting--;
    if (waiter.timer !== undefined) clearTimeout(waiter.timer);
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    const at = queue.waiters.indexOf(waiter);
    if (at > 0) queue.waiters.splice(at, 1); // the first is dropped by #head
    answer();
  }

  /** A lease of this limiter's was released: the queue of its scope asks again at once. */
  #wake(key: string): void {
    const queue = this.#queues.get(key);
    if (queue === undefined) return;
    if (queue.timer === undefined) {
      // A call in flight may have been refused before the release: it asks again at once.
      if (queue.asking !== undefined) queue.woken = true;
      return;
    }
    clearTimeout(queue.timer);
    queue.timer = undefined;
    queue.backoffMs = FIRST_BACKOFF_MS;
    this.#run(queue);
  }

  /** Counts a wait's outcome and reports it. */
  #count(outcome: WaitOutcome, target: Target, startedAt: number): void {
    const stats = this.#path.stats;
    if (outcome === 'granted') stats.waitGranted++;
    else if (outcome === 'timed_out') stats.waitTimedOut++;
    else if (outcome === 'aborted') stats.waitAborted++;
    else stats.waitOverflow++;
    this.#path.reporter?.waited(outcome, target, startedAt);
  }

  /** A refusal without a new Redis call: the last denial seen, else nothing known. */
  #refusal(target: Target, lease: boolean, last: Decision | undefined): Decision {
    const decision: Decision = last ?? {
      allowed: false,
      remaining: 0,
      limit: target.policy.limit,
      resetMs: 0,
      retryAfterMs: 0,
    };
    return lease ? this.#path.leases.lease(target, decision) : decision;
  }
}

/**
 * Whether `waiter`'s deadline has passed. A `maxWaitMs` of 0 has one attempt: its deadline
 * is its start, so it counts as passed only once that attempt was refused (`#answered`).
 */
function pastDeadline(waiter: Waiter): boolean {
  return waiter.deadline > waiter.startedAt && performance.now() >= waiter.deadline;
}

function isPolicyOfLeases(policy: Policy): policy is ConcurrencyPolicy {
  try {
    return isConcurrency(policy);
  } catch {
    return false;
  }
}

function readMaxWait(value: unknown): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_WAIT_MS) {
    return value;
  }
  throw new InvalidInputError('options.maxWaitMs', `an integer from 0 to ${MAX_WAIT_MS}`, value);
}

function readSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined || value instanceof AbortSignal) return value;
  throw new InvalidInputError('options.signal', 'an AbortSignal', value);
}

/** The error a wait rejects with when its signal fires: an `AbortError` (its cause, the reason). */
function abortError(signal: AbortSignal): Error {
  return new DOMException('The wait was aborted', { name: 'AbortError', cause: signal.reason });
}
