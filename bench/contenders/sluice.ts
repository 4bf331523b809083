/**
 * sluice as it stands in this repository's source: `RateLimiter` with default options on
 * `createRedisClient`, and a `fixedWindow` policy. Variants: `sluice-uncached` turns the
 * local denial cache off, so that every take reaches Redis; `sluice-nodeadline` patches the
 * deadline out; `sluice-<policy>` (opt-in) decides with another policy of the same limit
 * and window.
 */
import {
  createRedisClient,
  fixedWindow,
  gcra,
  type Policy,
  RateLimiter,
  type RateLimiterOptions,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from '../../src/index.js';
import type { Contender } from '../types.js';

const ROUTE = 'GET/bench';

type PolicyOf = (limit: number, windowMs: number) => Policy;

function sluiceContender(
  name: string,
  description: string,
  options: Omit<RateLimiterOptions, 'client' | 'store'>,
  policyOf: PolicyOf = (limit, windowMs) => fixedWindow({ limit, windowMs }),
): Contender {
  return {
    name,
    description,
    async setup(url, { limit, windowMs }) {
      const client = await createRedisClient({ url });
      const limiter = new RateLimiter({ client, ...options });
      const policy = policyOf(limit, windowMs);
      return {
        take: (tenant) => limiter.take({ tenant, route: ROUTE }, policy).then((d) => d.allowed),
        close: () => client.close(),
      };
    },
  };
}

export const contender = sluiceContender(
  'sluice',
  'RateLimiter with default options + fixedWindow, from ../src (node-redis v6)',
  {},
);

export const uncachedContender = sluiceContender(
  'sluice-uncached',
  'as sluice, with `denialCache: false` (every take reaches Redis)',
  { denialCache: false },
);

/**
 * As sluice, with the per-call deadline switched off — a measuring variant only, to show
 * what the shared-timer deadline costs ("deadline on vs off"). The library has no such
 * switch: this run patches the deadline queue inside its own child process.
 */
export const noDeadlineContender: Contender = {
  ...sluiceContender(
    'sluice-nodeadline',
    'as sluice, deadline tracking patched out (bench only)',
    {},
  ),
  async setup(url, policy) {
    const { DeadlineQueue } = await import('../../src/deadline.js');
    DeadlineQueue.prototype.track = (entry) => {
      entry.settled = false;
    };
    DeadlineQueue.prototype.settle = (entry) => {
      if (entry.settled) return false;
      entry.settled = true;
      return true;
    };
    return contender.setup(url, policy);
  },
};

/** sluice with each other policy, at the scenario's limit per window. */
export const policyContenders: Record<string, Contender> = {
  'sluice-sliding-log': sluiceContender(
    'sluice-sliding-log',
    'as sluice, slidingWindowLog',
    {},
    (limit, windowMs) => slidingWindowLog({ limit, windowMs }),
  ),
  'sluice-sliding-counter': sluiceContender(
    'sluice-sliding-counter',
    'as sluice, slidingWindowCounter',
    {},
    (limit, windowMs) => slidingWindowCounter({ limit, windowMs }),
  ),
  'sluice-token-bucket': sluiceContender(
    'sluice-token-bucket',
    'as sluice, tokenBucket (capacity = limit, refilled limit per window)',
    {},
    (limit, windowMs) =>
      tokenBucket({ capacity: limit, refillTokens: limit, refillIntervalMs: windowMs }),
  ),
  'sluice-gcra': sluiceContender(
    'sluice-gcra',
    'as sluice, gcra (burst = limit)',
    {},
    (limit, windowMs) => gcra({ limit, periodMs: windowMs }),
  ),
};
