/**
 * Decision events: one per decided policy, delivered to the limiter's metrics sink and its
 * `onDecision` callback. A limiter that has neither builds no reporter, so an unobserved
 * limiter reads no clock and builds no event.
 */
import { performance } from 'node:perf_hooks';
import { isPolicy } from '../algorithms/policy.js';
import type {
  DecisionEvent,
  DecisionOutcome,
  Metrics,
  WaitEvent,
  WaitOutcome,
} from '../metrics/types.js';
import { observe } from '../observer.js';
import { refused } from '../refused.js';
import type { Decision, Policy } from '../types.js';

/** One item of an observed call: what its events name. */
export interface ReportedItem {
  readonly policy: Policy;
  readonly parts: { readonly tenant: string; readonly route: string | undefined };
}

/** What an observed take or takeAll reports: its items, request id and start. */
export interface CallMeta {
  readonly targets: readonly ReportedItem[];
  readonly operation: 'take' | 'takeAll';
  readonly requestId: string | undefined;
  /** `performance.now()` when the call was made (0 for an answer without Redis). */
  readonly startedAt: number;
}

export class DecisionReporter {
  constructor(
    readonly metrics: Metrics | undefined,
    readonly onDecision: ((event: DecisionEvent) => void) | undefined,
    readonly withTenant: boolean,
  ) {}

  /**
   * Events for every item of a call, with the call's outcome — except in a refused call
   * (`limited`), where an item that did not refuse itself (see `refused.ts`) is `not_charged`.
   */
  report(
    meta: CallMeta,
    outcome: DecisionOutcome,
    cached: boolean,
    decisions?: readonly Decision[],
    error?: Error,
  ): void {
    const latencyMs =
      cached || outcome === 'overload' ? 0 : Math.max(0, performance.now() - meta.startedAt);
    const { targets, operation, requestId } = meta;
    for (let i = 0; i < targets.length; i++) {
      const { policy, parts } = targets[i] as ReportedItem;
      const decision = decisions?.[i];
      const own =
        outcome === 'limited' && decision !== undefined && !refused(decision)
          ? 'not_charged'
          : outcome;
      // One shape for every event (absent fields undefined): cheap to build and to read.
      this.deliver({
        outcome: own,
        policy: policy.name,
        route: parts.route,
        latencyMs,
        cached,
        operation,
        requestId,
        tenant: this.withTenant ? parts.tenant : undefined,
        // A copy: what an observer does to it never reaches the caller's decision.
        decision: decision === undefined ? undefined : Object.freeze({ ...decision }),
        error,
      });
    }
  }

  /** A call refused for bad input: one event, naming the policy when it was one. */
  invalid(
    operation: 'take' | 'takeAll',
    policy: unknown,
    requestId: string | undefined,
    error: Error,
  ): void {
    this.deliver({
      outcome: 'invalid',
      policy: isPolicy(policy) ? policy.name : '',
      route: undefined,
      latencyMs: 0,
      cached: false,
      operation,
      requestId,
      tenant: undefined,
      decision: undefined,
      error,
    });
  }

  /** A wait's outcome, for the metrics sink (`Metrics.wait`, when it has one). */
  waited(outcome: WaitOutcome, item: ReportedItem, startedAt: number): void {
    const metrics = this.metrics;
    if (metrics?.wait === undefined) return;
    const event: WaitEvent = {
      outcome,
      policy: item.policy.name,
      route: item.parts.route,
      waitedMs: Math.max(0, performance.now() - startedAt),
      tenant: this.withTenant ? item.parts.tenant : undefined,
    };
    observe('metrics.wait', () => metrics.wait?.(event));
  }

  deliver(event: DecisionEvent): void {
    const { metrics, onDecision } = this;
    if (metrics !== undefined) observe('metrics.decision', () => metrics.decision(event));
    if (onDecision !== undefined) observe('onDecision', () => onDecision(event));
  }
}
