/** The `prefetch` option of a policy builder (see `docs/prefetch.md`). */
import { InvalidInputError } from '../errors.js';
import type { PrefetchSpec } from '../types.js';
import { positiveSafeInteger, readProperty, rejectUnknownKeys } from '../validate.js';

/** Most units of one grant. */
export const MAX_PREFETCH_UNITS = 65_536;

/** Reads `options.prefetch`: undefined when absent, else a frozen `{ maxUnits }`. */
export function readPrefetch(options: object): PrefetchSpec | undefined {
  const value = readProperty(options, 'prefetch', 'policy');
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) {
    throw new InvalidInputError('policy.prefetch', 'an object { maxUnits }', value);
  }
  rejectUnknownKeys(value, ['maxUnits'], 'policy.prefetch');
  const maxUnits = positiveSafeInteger(
    'policy.prefetch.maxUnits',
    readProperty(value, 'maxUnits', 'policy.prefetch'),
    MAX_PREFETCH_UNITS,
  );
  return Object.freeze({ maxUnits });
}
