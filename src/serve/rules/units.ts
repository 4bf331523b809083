/**
 * The time units of Envoy's rate limit API and of the reference service's YAML (`second` …
 * `year`), with the length the reference gives each: a month is 30 days, a year 365 days.
 */

/** A unit as the API names it (`RateLimitResponse.RateLimit.Unit`, without `UNKNOWN`). */
export type Unit = 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'WEEK' | 'MONTH' | 'YEAR';

const DAY_MS = 86_400_000;

/** Each unit's length in ms. */
export const UNIT_MS: Readonly<Record<Unit, number>> = Object.freeze({
  SECOND: 1000,
  MINUTE: 60_000,
  HOUR: 3_600_000,
  DAY: DAY_MS,
  WEEK: 7 * DAY_MS,
  MONTH: 30 * DAY_MS,
  YEAR: 365 * DAY_MS,
});

/** The unit a YAML `unit` (any case) names, or undefined. */
export function unitOf(text: string): Unit | undefined {
  const upper = text.toUpperCase();
  return Object.hasOwn(UNIT_MS, upper) ? (upper as Unit) : undefined;
}

/** The unit an override's enum value names (a name or its number), or undefined. */
export function overrideUnit(value: unknown): Unit | undefined {
  if (typeof value === 'string') return value === 'UNKNOWN' ? undefined : unitOf(value);
  if (typeof value === 'number') return UNIT_NUMBERS[value];
  return undefined;
}

const UNIT_NUMBERS: readonly (Unit | undefined)[] = [
  undefined,
  'SECOND',
  'MINUTE',
  'HOUR',
  'DAY',
  'MONTH',
  'YEAR',
  'WEEK',
];
