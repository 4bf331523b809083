/**
 * The bounds every entry point shares: how long a scope's part may be, how many limits one
 * atomic decision may take, how many items one script call may carry, the longest timer.
 * Kept apart from the code that enforces them so that the limiter, the HTTP layer and the
 * policy-file compiler agree without importing each other.
 */

/** Longest tenant, route or user accepted, in UTF-16 code units. */
export const MAX_SCOPE_PART_LENGTH = 65_536;

/** Most items in one `takeAll` (and most limits stacked on one route). */
export const MAX_TAKE_ALL_ITEMS = 16;

/** Largest `maxBatchSize`: one script call blocks Redis while it runs; keep it short. */
export const MAX_BATCH_SIZE = 1024;

/** Longest `setTimeout` delay Node.js honours (2^31 − 1 ms). */
export const MAX_TIMER_MS = 2_147_483_647;
