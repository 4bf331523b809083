/**
 * The GCRA policy — Generic Cell Rate Algorithm, virtual scheduling form (ITU-T I.371, ATM
 * Forum TM 4.0; the formulation of Brandur Leach's `throttled` and redis-cell): a sustained
 * rate of `limit` per `periodMs` with bursts of up to `burst` at once, stored as one number
 * per scope, the theoretical arrival time (TAT).
 *
 * Time is in microseconds; the emission interval `periodMs × 1000 / limit` is rounded up to
 * a whole microsecond, so the policy is never faster than stated (and slower by at most
 * 1 µs per unit). Redis cost per decision: TIME + GET, plus SET … PX when admitted.
 */
import { InvalidInputError } from '../errors.js';
import type { Policy } from '../types.js';
import { ceilDiv, floorDiv } from './int-math.js';
import {
  buildPolicy,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  type PolicyIdentityOptions,
  policyIdentity,
  policyInteger,
  requireObject,
} from './policy.js';
import { loadScript } from './script.js';
import { intIn, luaNumber, numbers, type Twin } from './twin.js';

/** The GCRA script (one key). */
export const gcraScript = loadScript('gcra', import.meta.url, 1);

/** Options of {@link gcra}. */
export interface GcraOptions extends PolicyIdentityOptions {
  /** Units per `periodMs` at the sustained rate: a positive safe integer. */
  readonly limit: number;
  /** The period in ms: an integer from 1 to 315,360,000,000. */
  readonly periodMs: number;
  /** Units admissible at once (the burst), and the largest cost: a positive safe integer. Default `limit`. */
  readonly burst?: number;
}

/** A GCRA policy, made by {@link gcra}. `limit` in decisions is the burst. */
export interface GcraPolicy extends Policy {
  readonly algorithm: 'gcra';
  readonly periodMs: number;
  readonly burst: number;
  /** The emission interval in µs (rounded up). */
  readonly emissionIntervalUs: number;
}

/**
 * Builds a GCRA policy.
 *
 * Decision fields: `limit` = the burst; `remaining` = units admissible at once now;
 * `resetMs` = ms until the full burst is available again; `retryAfterMs` = ms until the same
 * cost is admitted (`Infinity` when cost > burst).
 *
 * @throws {InvalidInputError} for a bad `policy.limit`, `policy.periodMs`, `policy.burst`,
 *   `policy.name` or `policy.version`, or a burst × emission interval above 2^53 − 1 µs.
 */
export function gcra(options: GcraOptions): GcraPolicy {
  requireObject(options, '{ limit, periodMs }', ['limit', 'periodMs', 'burst']);
  const limit = policyInteger(options, 'limit', MAX_LIMIT);
  const periodMs = policyInteger(options, 'periodMs', MAX_WINDOW_MS);
  const burst = policyInteger(options, 'burst', MAX_LIMIT, limit);
  const emissionIntervalUs = ceilDiv(periodMs * 1000, limit);
  // TAT stays below now (~2^50.6 µs) + 2 × burst × T: keep that under 2^53.
  if (burst * emissionIntervalUs > 2 ** 51) {
    throw new InvalidInputError(
      'policy.burst',
      'small enough that burst × period / limit ≤ 2^51 µs (about 71 years)',
      burst,
    );
  }
  const { name, version, block } = policyIdentity(options);
  const burstMs = ceilDiv(burst * emissionIntervalUs, 1000);
  return buildPolicy(
    {
      name,
      summary: `${limit}-per-${periodMs}ms-burst-${burst}`,
      horizonMs: burstMs,
      algorithm: 'gcra',
      keyTag: 'gcra',
      limit: burst,
      version,
      block,
      maxCost: burst,
      script: gcraScript,
      quotaWindowMs: burstMs,
      params: [emissionIntervalUs, burst],
    },
    { algorithm: 'gcra' as const, periodMs, burst, emissionIntervalUs },
  );
}

/** The in-memory twin of `gcra.lua` (see `twin.ts`). */
const msUp = (us: number) => (us <= 0 ? 0 : floorDiv(us + 999, 1000));

/** The in-memory twin of `gcra.lua` (see `twin.ts`). */
export const gcraTwin: Twin = (state, key, args, { dry, probe }) => {
  const [interval, burst, given] = numbers(args, 3);
  const cost = probe ? burst + 1 : given;
  const now = state.nowUs;
  const tolerance = burst * interval;
  const horizon = msUp(tolerance);
  const value = state.get<unknown>(key, 'string');
  let stored = value !== undefined;
  let tat = luaNumber(value);
  if (stored && !intIn(tat, 0, now + 2 * tolerance)) {
    if (!dry) state.delete(key);
    stored = false;
    tat = undefined;
  }
  tat = Math.max(tat ?? 0, now);
  const stepped = tat > now + tolerance;
  const remaining = Math.max(floorDiv(tolerance - (tat - now), interval), 0);
  const newTat = tat + cost * interval;
  const allowAt = newTat - tolerance;
  if (cost > burst || allowAt > now) {
    let ttl = -2;
    if (stored) {
      ttl = state.pttl(key);
      if (ttl < 0 || ttl > horizon) {
        ttl = Math.max(Math.min(msUp(tat - now), horizon), 1);
        if (!dry) state.pexpire(key, ttl);
      }
    }
    const real = (ms: number, slack: number) => (stepped && ms > ttl + slack ? ttl + slack : ms);
    const retry = cost > burst ? -1 : real(msUp(allowAt - now), 1);
    return [0, remaining, real(msUp(tat - now), 0), retry];
  }
  if (dry) return [1, remaining, msUp(tat - now), 0];
  state.set(key, 'string', newTat, msUp(newTat - now));
  return [1, floorDiv(tolerance - (newTat - now), interval), msUp(newTat - now), 0];
};
