/**
 * Test-only: state of the weighted sliding window log as its script writes it, for tests
 * that write a log by hand: one sorted-set member per admitted take, scored by its admission
 * time in ms, named `<running total, 16 digits>:<cost>` (see `sliding-window-log.lua`).
 */

/** The member of a take of `cost` units that brings the log's running total to `total`. */
export function logMember(total: number, cost: number): string {
  return `${String(total).padStart(16, '0')}:${cost}`;
}

/**
 * ZADD arguments (score, member, …) of takes of the given costs, all at `ms`, the running
 * total starting after `base`.
 */
export function logTakes(ms: number, costs: readonly number[], base = 0): string[] {
  let total = base;
  return costs.flatMap((cost) => {
    total += cost;
    return [String(ms), logMember(total, cost)];
  });
}
