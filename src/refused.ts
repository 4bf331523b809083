/**
 * Which policy refused: the one rule that the decision events (and so every metric and log
 * built from them) and the HTTP layer (`violated-policies`, the RateLimit fields) share, so
 * that a `429` and a dashboard always name the same policies.
 *
 * A refused `takeAll` charges nothing on any item, and every item reports `allowed: false`.
 * The script tells the items apart by their wait: a blocking item reports its denial (a
 * `retryAfterMs` of at least 1, or `Infinity` when its cost can never fit), an item that would
 * have fitted reports `retryAfterMs: 0`; so does an item of a refusal answered by the local
 * denial cache that the cache did not hold (it was not evaluated). A refused `take` always has
 * a wait.
 */
import type { Decision } from './types.js';

/**
 * True when `decision` is a refusal by its own policy: denied, with a wait (`retryAfterMs`
 * above 0, `Infinity` included). False for an admission and for an item of a refused
 * `takeAll` that was not charged only because another item refused.
 */
export function refused(decision: Decision): boolean {
  return !decision.allowed && decision.retryAfterMs > 0;
}
