/**
 * The registry of contenders, by name, loaded lazily so that a child process imports only
 * the library it measures. All of them run unless `--contenders` says otherwise: the two
 * sluice variants (`sluice-uncached`, `sluice-nodeadline`) are what the targets compare
 * against for the denial cache and the deadline's cost.
 */
import type { Contender } from '../types.js';

const loaders: Record<string, () => Promise<Contender>> = {
  sluice: async () => (await import('./sluice.js')).contender,
  seed: async () => (await import('./seed.js')).contender,
  'rate-limiter-flexible': async () => (await import('./rate-limiter-flexible.js')).contender,
  'rate-limit-redis': async () => (await import('./rate-limit-redis.js')).contender,
  floor: async () => (await import('./floor.js')).contender,
  'seed-floor': async () => (await import('./seed-floor.js')).contender,
  'rate-limiter-flexible-3': async () =>
    (await import('./rate-limiter-flexible.js')).stackedContender,
  'sluice-node-redis': async () => (await import('./sluice.js')).nodeRedisContender,
  'sluice-node-redis-shared': async () => (await import('./sluice.js')).nodeRedisSharedContender,
  'sluice-ioredis': async () => (await import('./sluice.js')).ioredisContender,
  'sluice-ioredis-shared': async () => (await import('./sluice.js')).ioredisSharedContender,
  'sluice-uncached': async () => (await import('./sluice.js')).uncachedContender,
  'sluice-nodeadline': async () => (await import('./sluice.js')).noDeadlineContender,
  'sluice-takeall3': async () => (await import('./sluice.js')).takeAll3Contender,
  'sluice-take3': async () => (await import('./sluice.js')).take3Contender,
  'sluice-metrics': async () => (await import('./sluice.js')).metricsContender,
};
for (const name of [
  'sluice-sliding-log',
  'sluice-sliding-counter',
  'sluice-token-bucket',
  'sluice-gcra',
]) {
  loaders[name] = async () => (await import('./sluice.js')).policyContenders[name] as Contender;
}

export const contenderNames = Object.keys(loaders);
/**
 * The policy variants, `sluice-take3`, `sluice-metrics` and the `-shared` own clients are opt-in
 * (`--contenders sluice,sluice-gcra,…`): a full run stays within about ten minutes.
 * `sluice-takeall3` runs by default: a target compares it with `sluice`.
 */
export const defaultContenderNames = contenderNames.filter(
  (name) => !/^sluice-(sliding|token|gcra|take3$|metrics$|.*-shared$)/.test(name),
);

export function loadContender(name: string): Promise<Contender> {
  const load = loaders[name];
  if (load === undefined) {
    throw new Error(`unknown contender "${name}" (known: ${contenderNames.join(', ')})`);
  }
  return load();
}
