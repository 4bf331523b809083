/**
 * `sluice/valkey-glide`: what a Valkey GLIDE client (`@valkey/valkey-glide`) needs to be
 * given to a limiter. A `GlideClient` or `GlideClusterClient` goes to
 * `new RateLimiter({ client })` from the root entry as it is, created with the options
 * below; this entry loads no GLIDE code.
 *
 * ```ts
 * import { GlideClusterClient } from '@valkey/valkey-glide';
 * import { GLIDE_CLUSTER_OPTIONS } from 'sluice/valkey-glide';
 * const client = await GlideClusterClient.createClient({
 *   addresses: [{ host: '127.0.0.1', port: 7000 }],
 *   ...GLIDE_CLUSTER_OPTIONS,
 * });
 * ```
 *
 * @packageDocumentation
 */
export {
  GLIDE_CLUSTER_OPTIONS,
  GLIDE_OPTIONS,
  type GlideClientLike,
  type GlideClusterClientLike,
  type GlideSlotKeyRoute,
} from './stores.js';
