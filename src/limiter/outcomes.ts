/**
 * The last step of every call: its outcome. An answer is decoded, remembered by the local
 * denial cache, counted, reported as decision events and handed to the caller — unless the
 * caller already got a `TimeoutError`, in which case only the cache and the in-flight count
 * learn from it. A failure is a `StoreError` (Redis answered with an error), a
 * `RedisConfigError` (Redis refused the connection's configuration: a password, a
 * permission) or an `UnavailableError` (anything else), counted and reported the same way.
 */
import { decodeDecision, REPLY_SLOTS } from '../algorithms/batch-wire.js';
import { RedisConfigError, StoreError, TimeoutError, UnavailableError } from '../errors.js';
import type { Decision } from '../types.js';
import type { Call, GroupCall, InFlight, PricedAnswer, ResetCall, Settler } from './calls.js';
import type { DeadlineQueue } from './deadline.js';
import type { DecisionReporter } from './events.js';
import type { LocalDenials } from './local-denials.js';
import { IdCall, IdGroupCall } from './retry-safe.js';
import type { LimiterStats } from './stats.js';
import type { Target } from './targets.js';

export class Outcomes implements Settler {
  constructor(
    readonly stats: LimiterStats,
    readonly deadlines: DeadlineQueue,
    readonly denials: LocalDenials,
    /** Decision events' destination; undefined when nothing observes the limiter. */
    readonly reporter: DecisionReporter | undefined,
  ) {}

  answered(call: Call, reply: readonly unknown[], offset: number, sentAt: number): void {
    this.stats.inFlight--;
    const { policy, localKey, cost } = call.target;
    const decision = decodeDecision(reply, offset, policy.limit);
    if (decision === undefined) {
      this.failed(call, new StoreError(`ERR unexpected reply from ${policy.script.name}`), true);
      return;
    }
    const dry = call.op === 'p';
    // A replayed answer tells the state when it was first decided: not for the cache.
    const replayed = call instanceof IdCall ? call.replayed : undefined;
    if (replayed !== true) this.denials.remember(policy, localKey, cost, decision, sentAt, dry);
    if (!this.deadlines.settle(call)) {
      call.late?.(decision); // the caller already got a TimeoutError
      return;
    }
    if (dry) this.stats.peeks++;
    else if (decision.allowed) this.stats.allowed++;
    else this.stats.limited++;
    if (call.meta !== undefined) {
      this.reporter?.report(call.meta, decision.allowed ? 'allowed' : 'limited', false, [decision]);
    }
    call.resolve(replayed === undefined ? decision : { ...decision, replayed });
  }

  groupAnswered(call: GroupCall, reply: readonly unknown[], offset: number, sentAt: number): void {
    this.stats.inFlight--;
    const decisions: Decision[] = [];
    let allowed = true;
    let retryAfterMs = 0;
    for (let j = 0; j < call.targets.length; j++) {
      const target = call.targets[j] as Target;
      const decision = decodeDecision(reply, offset + REPLY_SLOTS * j, target.policy.limit);
      if (decision === undefined) {
        this.failed(call, new StoreError('ERR unexpected reply from batch'), true);
        return;
      }
      decisions.push(decision);
      if (!decision.allowed) allowed = false;
      if (decision.retryAfterMs > retryAfterMs) retryAfterMs = decision.retryAfterMs;
    }
    const replayed = call instanceof IdGroupCall ? call.replayed : undefined;
    for (let j = 0; j < decisions.length && replayed !== true; j++) {
      const { policy, localKey, cost } = call.targets[j] as Target;
      this.denials.remember(policy, localKey, cost, decisions[j] as Decision, sentAt, false);
    }
    const result = { allowed, decisions, retryAfterMs: allowed ? 0 : retryAfterMs, cached: false };
    if (!this.deadlines.settle(call)) {
      call.late?.(result); // the caller already got a TimeoutError
      return;
    }
    if (allowed) this.stats.allowed++;
    else this.stats.limited++;
    if (call.meta !== undefined) {
      this.reporter?.report(call.meta, allowed ? 'allowed' : 'limited', false, decisions);
    }
    call.resolve(replayed === undefined ? result : { ...result, replayed });
  }

  /** The scope's key is gone: drop its cached denial here, then tell every other limiter. */
  deleted(call: ResetCall, existed: boolean): void {
    this.denials.forget(call.target.localKey);
    this.denials.announceReset().then(
      () => {
        this.stats.inFlight--;
        if (!this.deadlines.settle(call)) return;
        this.stats.resets++;
        call.resolve(existed);
      },
      (error: unknown) => this.failed(call, error),
    );
  }

  pricedAnswered(call: PricedAnswer, reply: readonly unknown[], offset: number): void {
    this.stats.inFlight--;
    if (!this.deadlines.settle(call)) return;
    call.finish(reply, offset);
  }

  failed(call: InFlight, error: unknown, counted = false): void {
    if (!counted) this.stats.inFlight--;
    if (!this.deadlines.settle(call)) return;
    const failure =
      error instanceof StoreError ||
      error instanceof UnavailableError ||
      error instanceof RedisConfigError
        ? error
        : toUnavailable(error);
    const outcome =
      failure instanceof StoreError
        ? 'store_error'
        : failure instanceof RedisConfigError
          ? 'config_error'
          : 'unavailable';
    if (outcome === 'store_error') this.stats.storeError++;
    else if (outcome === 'config_error') this.stats.configError++;
    else this.stats.unavailable++;
    if (call.meta !== undefined) {
      this.reporter?.report(call.meta, outcome, false, undefined, failure);
    }
    call.reject(failure);
  }

  expired(call: InFlight): void {
    if (call.held) {
      // Never sent: the deadline passed while the client was still connecting.
      call.held = false;
      this.stats.inFlight--;
      this.stats.unavailable++;
      const error = new UnavailableError(
        `Redis unavailable: the client was still connecting after ${this.deadlines.timeoutMs} ms; nothing was sent`,
      );
      if (call.meta !== undefined) {
        this.reporter?.report(call.meta, 'unavailable', false, undefined, error);
      }
      call.reject(error);
      return;
    }
    this.stats.timeout++;
    const error = new TimeoutError(this.deadlines.timeoutMs);
    if (call.meta !== undefined) {
      this.reporter?.report(call.meta, 'timeout', false, undefined, error);
    }
    call.reject(error);
  }
}

function toUnavailable(error: unknown): UnavailableError {
  const message = error instanceof Error ? error.message : String(error);
  return new UnavailableError(`Redis unavailable: ${message}`, { cause: error });
}
