/**
 * The sluice policy that decides a rule (or a request's own override): a fixed window of
 * `requests_per_unit` per unit by default, anchored at first hit; or the algorithm the rule
 * names (sluice's extension): `token-bucket` (capacity `burst`, default `requests_per_unit`,
 * refilled `requests_per_unit` per unit), `gcra` (`requests_per_unit` per unit, `burst`),
 * `sliding-window-log` (`requests_per_unit` per unit, at most `MAX_PRICED_LOG_LIMIT`: a
 * refused request is charged) and `sliding-window-counter` (`requests_per_unit` per unit).
 */
import { fixedWindow } from '../algorithms/fixed-window.js';
import { gcra } from '../algorithms/gcra.js';
import { slidingWindowCounter } from '../algorithms/sliding-window-counter.js';
import { MAX_PRICED_LOG_LIMIT, slidingWindowLog } from '../algorithms/sliding-window-log.js';
import { tokenBucket } from '../algorithms/token-bucket.js';
import { InvalidInputError } from '../errors.js';
import type { Policy } from '../types.js';
import type { Algorithm } from './rules/parse.js';
import type { Rule } from './rules/tree.js';
import { UNIT_MS, type Unit } from './rules/units.js';

/**
 * The policy of one limit: `limit` per `windowMs` under `algorithm`.
 *
 * @throws {InvalidInputError} a limit the algorithm refuses; `requests_per_unit` for a
 *   sliding-window-log limit above `MAX_PRICED_LOG_LIMIT` (500).
 */
export function policyFor(
  algorithm: Algorithm,
  limit: number,
  windowMs: number,
  burst: number | undefined,
): Policy {
  switch (algorithm) {
    case 'token-bucket':
      return tokenBucket({
        capacity: burst ?? limit,
        refillTokens: limit,
        refillIntervalMs: windowMs,
      });
    case 'gcra':
      return gcra({ limit, periodMs: windowMs, burst: burst ?? limit });
    case 'sliding-window-log':
      // A refused request's hits are charged (decide.ts), and a log is charged only up to
      // MAX_PRICED_LOG_LIMIT: a larger log is an error of the file, found at load.
      if (limit > MAX_PRICED_LOG_LIMIT) {
        throw new InvalidInputError(
          'requests_per_unit',
          `at most ${MAX_PRICED_LOG_LIMIT} with algorithm sliding-window-log (the service charges a refused request's hits, and a log is charged only up to that limit): a lower limit, or another algorithm such as sliding-window-counter`,
          limit,
        );
      }
      return slidingWindowLog({ limit, windowMs });
    case 'sliding-window-counter':
      return slidingWindowCounter({ limit, windowMs });
    default:
      return fixedWindow({ limit, windowMs });
  }
}

/**
 * Policies, built once per rule and per override (bounded: past `max` overrides the cache
 * starts again), so the hot path builds none.
 */
export class Policies {
  readonly #rules = new WeakMap<Rule, Policy>();
  readonly #overrides = new Map<string, Policy>();
  readonly #max: number;

  constructor(max = 1024) {
    this.#max = max;
  }

  /** A limited rule's policy. */
  ofRule(rule: Rule): Policy {
    let policy = this.#rules.get(rule);
    if (policy === undefined) {
      const l = rule.limit;
      policy = policyFor(l.algorithm, l.requestsPerUnit, rule.unitMs, l.burst);
      this.#rules.set(rule, policy);
    }
    return policy;
  }

  /** An override's policy: a fixed window of `requestsPerUnit` per `unit`. */
  ofOverride(requestsPerUnit: number, unit: Unit): Policy {
    const key = `${requestsPerUnit}/${unit}`;
    let policy = this.#overrides.get(key);
    if (policy === undefined) {
      if (this.#overrides.size >= this.#max) this.#overrides.clear();
      policy = fixedWindow({ limit: requestsPerUnit, windowMs: UNIT_MS[unit] });
      this.#overrides.set(key, policy);
    }
    return policy;
  }
}
