/**
 * What the stacked contenders share (`sluice-takeall3`, `sluice-take3`,
 * `rate-limiter-flexible-3`): each request takes a tenant-wide limit, a per-route limit
 * and a per-user limit, the user one of the tenant's {@link STACKED_USERS}.
 */

/** Users per tenant. */
export const STACKED_USERS = 20;

/** The user of the next request: one of {@link STACKED_USERS}, uniformly. */
export function stackedUser(): string {
  return `u${Math.floor(Math.random() * STACKED_USERS)}`;
}
