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
 * A policy's parameters under the names a policy file gives them: `{ limit, windowMs }`
 * (fixed window, sliding windows), `{ capacity, refillTokens, refillIntervalMs }` (token
 * bucket), `{ limit, periodMs, burst }` (GCRA, whose `limit` is the rate its emission
 * interval gives: `periodMs` × 1000 / the interval in µs, rounded up to a whole µs),
 * `{ limit, leaseMs }` (concurrency). Not the
 * policy's `limit` and `quotaWindowMs`, which for a token bucket and GCRA are the burst and
 * the time to refill it.
 */
export function policyParameters(policy: Policy): Record<string, number> {
  const p = policy as Policy & Record<string, number | undefined>;
  if (typeof p.windowMs === 'number') return { limit: policy.limit, windowMs: p.windowMs };
  if (typeof p.leaseMs === 'number') return { limit: policy.limit, leaseMs: p.leaseMs };
  if (typeof p.refillIntervalMs === 'number') {
    return {
      capacity: p.capacity as number,
      refillTokens: p.refillTokens as number,
      refillIntervalMs: p.refillIntervalMs,
    };
  }
  if (typeof p.periodMs === 'number' && typeof p.emissionIntervalUs === 'number') {
    const rate = Math.round((p.periodMs * 1000) / p.emissionIntervalUs);
    return { limit: rate, periodMs: p.periodMs, burst: p.burst as number };
  }
  return { limit: policy.limit, windowMs: policy.quotaWindowMs };
}

/** A policy's block as a policy file gives it: `{ blockMs, escalate? }`, or nothing. */
export function policyBlock(policy: Policy): {
  blockMs?: number;
  escalate?: { factor: number; maxMs: number; withinMs: number };
} {
  const b = policy.block;
  if (b === undefined) return {};
  if (b.factor === 1) return { blockMs: b.blockMs };
  return {
    blockMs: b.blockMs,
    escalate: { factor: b.factor, maxMs: b.maxMs, withinMs: b.withinMs },
  };
}

/** `, blocks of 1 min` (`, ×2 within 1 h, up to 1 h` when escalating), or nothing. */
function blockWords(policy: Policy): string {
  const b = policy.block;
  if (b === undefined) return '';
  const escalate =
    b.factor === 1 ? '' : ` (×${b.factor} within ${span(b.withinMs)}, up to ${span(b.maxMs)})`;
  return `, blocks of ${span(b.blockMs)}${escalate}`;
}

/**
 * A policy in words, from its own parameters: `fixed-window, 10 per 60 s`,
 * `token-bucket, 20 tokens, 5 more every 1 s`, `gcra, 10 per 1 s, bursts of 5`.
 */
export function describePolicy(policy: Policy): string {
  const version = `${blockWords(policy)}${policy.version === '1' ? '' : `, version ${policy.version}`}`;
  const p = policyParameters(policy);
  if (p.refillIntervalMs !== undefined) {
    return `${policy.algorithm}, ${p.capacity} tokens, ${p.refillTokens} more every ${span(p.refillIntervalMs)}${version}`;
  }
  if (p.periodMs !== undefined) {
    return `${policy.algorithm}, ${p.limit} per ${span(p.periodMs)}, bursts of ${p.burst}${version}`;
  }
  if (p.leaseMs !== undefined) {
    return `${policy.algorithm}, ${p.limit} at once, leases of ${span(p.leaseMs)}${version}`;
  }
  return `${policy.algorithm}, ${p.limit} per ${span(p.windowMs as number)}${version}`;
}
