/** Policies in words, for the `sluice` command's summaries. */
import type { Policy } from '../types.js';

/** A time span in the largest unit that states it exactly: `500 ms`, `90 s`, `5 min`, `1 h`. */
export function span(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0 && ms >= 120_000) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}

/**
 * A policy in words, from its own parameters: `fixed-window, 10 per 60 s`,
 * `token-bucket, 20 tokens, 5 more every 1 s`, `gcra, 10 per 1 s, bursts of 5`.
 */
export function describePolicy(policy: Policy): string {
  const p = policy as Policy & Record<string, number | undefined>;
  const version = policy.version === '1' ? '' : `, version ${policy.version}`;
  if (typeof p.windowMs === 'number') {
    return `${policy.algorithm}, ${policy.limit} per ${span(p.windowMs)}${version}`;
  }
  if (typeof p.refillIntervalMs === 'number') {
    return `${policy.algorithm}, ${p.capacity} tokens, ${p.refillTokens} more every ${span(p.refillIntervalMs)}${version}`;
  }
  if (typeof p.periodMs === 'number' && typeof p.emissionIntervalUs === 'number') {
    const rate = Math.round((p.periodMs * 1000) / p.emissionIntervalUs);
    return `${policy.algorithm}, ${rate} per ${span(p.periodMs)}, bursts of ${p.burst}${version}`;
  }
  return `${policy.algorithm}, ${policy.limit} per ${span(policy.quotaWindowMs)}${version}`;
}
