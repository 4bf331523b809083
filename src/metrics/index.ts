/**
 * `sluice/metrics`: what sluice reports for observation — the shapes of decision events,
 * HTTP outcomes and connection events, and the `Metrics` interface a sink implements (as
 * `sluice/prometheus` and `sluice/opentelemetry` do). Types only: it loads nothing.
 *
 * @packageDocumentation
 */
export type {
  DecisionEvent,
  DecisionOutcome,
  HttpOutcome,
  LimiterSource,
  Metrics,
  RedisEvent,
  RequestEvent,
  WaitEvent,
  WaitOutcome,
} from './types.js';
