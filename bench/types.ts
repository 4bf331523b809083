/**
 * Shared shapes of the benchmark: what a contender is, what one measured run is given and
 * what it reports back to the parent.
 */

/** The policy every contender enforces in a run: `limit` takes per `windowMs`. */
export interface BenchPolicy {
  readonly limit: number;
  readonly windowMs: number;
}

/** A connected limiter under test. */
export interface Taker {
  /** One decision for `key`: resolves `true` when allowed, `false` when denied. */
  take(key: string): Promise<boolean>;
  /** Closes every connection the contender opened. */
  close(): Promise<void>;
}

/** A rate limiter implementation to benchmark. */
export interface Contender {
  readonly name: string;
  /** One line on what is measured, for the report. */
  readonly description: string;
  setup(redisUrl: string, policy: BenchPolicy): Promise<Taker>;
}

/** What the parent hands to one child process (as JSON in argv). */
export interface RunConfig {
  readonly contender: string;
  readonly scenario: string;
  readonly concurrency: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  readonly redisUrl: string;
}

/** What the child measured itself, over the measured span only. */
export interface ChildMeasurement {
  /** Settled decisions (allowed + denied); errors are not decisions. */
  readonly decisions: number;
  readonly allowed: number;
  readonly denied: number;
  readonly errors: number;
  readonly firstError?: string;
  /** From the first call to the last settlement, in ms. */
  readonly elapsedMs: number;
  /** Latency percentiles of decisions, in µs. */
  readonly p50Us: number;
  readonly p99Us: number;
  readonly p999Us: number;
  readonly maxUs: number;
  /** `process.cpuUsage()` user + system over the measured span, in µs. */
  readonly nodeCpuUs: number;
}

/** One measured run, as stored in results.json. */
export interface RunResult extends ChildMeasurement {
  readonly round: number;
  readonly contender: string;
  readonly scenario: string;
  readonly concurrency: number;
  readonly decisionsPerSec: number;
  readonly nodeCpuUsPerDecision: number;
  readonly redisCpuUsPerDecision: number;
  /** Every command Redis counted (including those called inside Lua scripts), per decision. */
  readonly redisCommandsPerDecision: number;
  /** Top-level script calls (EVAL, EVALSHA, …) per decision: round trips. */
  readonly scriptCallsPerDecision: number;
}

/** Messages of the parent ↔ child protocol (over the fork IPC channel). */
export type ChildMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'result'; readonly measurement: ChildMeasurement }
  | { readonly type: 'failed'; readonly message: string };
export type ParentMessage = { readonly type: 'go' } | { readonly type: 'finish' };
