/**
 * The `t` of the `RateLimit` field: draft-ietf-httpapi-ratelimit-headers-10 §4.1.2 defines it
 * as the number of seconds until additional quota of the policy is made available — not
 * until the scope is back to its full quota. The two differ wherever quota comes back a unit
 * at a time: a token bucket refills token by token, a GCRA frees one unit per emission
 * interval. A fixed window gives every unit back at once, when it ends.
 */
import type { GcraPolicy } from '../algorithms/gcra.js';
import type { TokenBucketPolicy } from '../algorithms/token-bucket.js';
import type { Decision, Policy } from '../types.js';

/**
 * Ms until at least one more unit of `policy` is available, estimated from a decision:
 *
 * - token bucket: the time to full (`resetMs`) less the refill time of the tokens still
 *   missing after the next one, `(limit − remaining − 1) × refillIntervalMs / refillTokens`;
 * - GCRA: likewise with one unit per emission interval;
 * - fixed window, the sliding windows, or no policy: `resetMs`, the time to a clean state —
 *   exact for a fixed window (its units come back together), an upper bound for the sliding
 *   windows, whose decisions do not say when their oldest units leave;
 * - 0 when the scope already holds its whole quota (nothing more to come).
 *
 * Never earlier than the true instant: `resetMs` is rounded up, and so is the result.
 */
export function nextUnitMs(decision: Decision, policy?: Policy): number {
  const { remaining, limit } = decision;
  const resetMs = Math.max(decision.resetMs, 0);
  if (remaining >= limit) return 0;
  const missingAfterNext = limit - remaining - 1;
  switch (policy?.algorithm) {
    case 'token-bucket': {
      const { refillIntervalMs, refillTokens } = policy as TokenBucketPolicy;
      return Math.max(0, Math.ceil(resetMs - (missingAfterNext * refillIntervalMs) / refillTokens));
    }
    case 'gcra': {
      const { emissionIntervalUs } = policy as GcraPolicy;
      return Math.max(0, Math.ceil(resetMs - (missingAfterNext * emissionIntervalUs) / 1000));
    }
    default:
      return resetMs;
  }
}

/**
 * The `t` parameter of one policy's `RateLimit` item, in whole seconds rounded up
 * (draft-ietf-httpapi-ratelimit-headers-10 §4.1.2: seconds until additional quota is made
 * available). On a denial with a finite wait it is never later than `Retry-After` (§6: the
 * `Retry-After` instant is not earlier than `t`): the `Retry-After` instant itself for a
 * fixed or sliding window (exact for a cost of 1), else the earlier of that and the next
 * unit. Otherwise the time to the next unit ({@link nextUnitMs}).
 */
export function resetParameterSeconds(decision: Decision, policy?: Policy): number {
  const { retryAfterMs } = decision;
  if (!decision.allowed && retryAfterMs > 0 && Number.isFinite(retryAfterMs)) {
    const algorithm = policy?.algorithm;
    const unitWise = algorithm === 'token-bucket' || algorithm === 'gcra';
    const ms = unitWise ? Math.min(retryAfterMs, nextUnitMs(decision, policy)) : retryAfterMs;
    // As `Retry-After` (`retryAfterSeconds` in core.ts): rounded up, at least 1.
    return Math.max(1, Math.ceil(ms / 1000));
  }
  return Math.ceil(nextUnitMs(decision, policy) / 1000);
}
