/**
 * sluice as it stands in this repository (its build, `dist/`, or with `SLUICE_BENCH_BUILD=src`
 * its source; see build.ts): `RateLimiter` with default options on
 * `connectRedis`, and a `fixedWindow` policy. Variants: `sluice-uncached` turns the
 * local denial cache off, so that every take reaches Redis; `sluice-nodeadline` patches the
 * deadline out; `sluice-<policy>` (opt-in) decides with another policy of the same limit
 * and window; `sluice-takeall3` (opt-in) decides each take with one `takeAll` of three
 * stacked limits of the tenant, and `sluice-take3` (opt-in, its reference) with three
 * independent `take`s of the same three limits; `sluice-metrics` (opt-in) is sluice with
 * `prometheusMetrics()` on the limiter and its client, scraped once a second.
 */
import type * as Sluice from '../../src/index.js';
import type { AcceptedClient, Policy, RateLimiterOptions, TakeAllItem } from '../../src/index.js';
import type * as NodeRedisConnect from '../../src/redis/node-redis/connect.js';
import type { Contender } from '../types.js';
import { SLUICE_BUILD, sluiceModule } from './build.js';
import { stackedUser } from './stacked.js';

const { fixedWindow, gcra, RateLimiter, slidingWindowCounter, slidingWindowLog, tokenBucket } =
  await sluiceModule<typeof Sluice>('index');
const { connectRedis } = await sluiceModule<typeof NodeRedisConnect>('redis/node-redis/connect');

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
      const client = await connectRedis({ url });
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
  `RateLimiter with default options + fixedWindow, connectRedis (node-redis v6), from ${SLUICE_BUILD}/`,
  {},
);

/**
 * sluice on the application's own clients, as the client table of the README allows: a
 * node-redis v6 `createClient({ disableOfflineQueue: true })` and an ioredis `Redis` with
 * `IOREDIS_OPTIONS`, each given to `RateLimiter` as is (on either, the limiter opens its script
 * connection beside it; `sluice-node-redis-shared` and
 * `sluice-ioredis-shared`, opt-in, turn that off).
 */
/** sluice with default options and fixedWindow on a client the application made itself. */
function ownClientContender(
  name: string,
  description: string,
  connect: (url: string) => Promise<{ client: AcceptedClient; close(): Promise<void> }>,
  options: Pick<RateLimiterOptions, 'scriptConnection'> = {},
): Contender {
  return {
    name,
    description,
    async setup(url, { limit, windowMs }) {
      const { client, close } = await connect(url);
      const limiter = new RateLimiter({ client, ...options });
      const policy = fixedWindow({ limit, windowMs });
      return {
        take: (tenant) => limiter.take({ tenant, route: ROUTE }, policy).then((d) => d.allowed),
        close,
      };
    },
  };
}

async function ownNodeRedis(url: string) {
  const { createClient } = await import('redis');
  const client = createClient({ url, disableOfflineQueue: true });
  client.on('error', () => {}); // failures surface as rejected calls
  await client.connect();
  return { client, close: () => client.close() };
}

export const nodeRedisContender = ownClientContender(
  'sluice-node-redis',
  "as sluice, on the user's own node-redis v6 client (createClient; the limiter's script connection beside it)",
  ownNodeRedis,
);

export const nodeRedisSharedContender = ownClientContender(
  'sluice-node-redis-shared',
  "as sluice-node-redis, with scriptConnection: false (every script on the user's client)",
  ownNodeRedis,
  { scriptConnection: false },
);

async function ownIoRedis(url: string) {
  const { Redis } = await import('ioredis');
  const { IOREDIS_OPTIONS } =
    await sluiceModule<typeof import('../../src/redis/ioredis/stores.js')>('redis/ioredis/stores');
  const client = new Redis(url, { ...IOREDIS_OPTIONS, lazyConnect: true });
  client.on('error', () => {}); // failures surface as rejected calls
  await client.connect();
  return {
    client,
    async close() {
      await client.quit();
    },
  };
}

export const ioredisContender = ownClientContender(
  'sluice-ioredis',
  "as sluice, on the user's own ioredis client (new Redis(url, IOREDIS_OPTIONS); the limiter's script connection beside it)",
  ownIoRedis,
);

export const ioredisSharedContender = ownClientContender(
  'sluice-ioredis-shared',
  "as sluice-ioredis, with scriptConnection: false (every script on the user's client)",
  ownIoRedis,
  { scriptConnection: false },
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
    const { DeadlineQueue } =
      await sluiceModule<typeof import('../../src/limiter/deadline.js')>('limiter/deadline');
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

/**
 * One decision = `takeAll` of three stacked fixed-window limits of one tenant: tenant-wide,
 * per route and per user (route + user), each at the scenario's limit and window, each its
 * own named policy (so its own key). Allowed when all three admit. With equal limits the
 * three counters move together, so the binding limit admits exactly `limit` (the
 * correctness gate's 10 of 30) and a refused takeAll writes nothing.
 */
export const takeAll3Contender: Contender = {
  name: 'sluice-takeall3',
  description:
    'as sluice, each decision a takeAll of 3 fixedWindow limits of the tenant (tenant, route, route+user)',
  async setup(url, { limit, windowMs }) {
    const client = await connectRedis({ url });
    const limiter = new RateLimiter({ client });
    const items = stackedItems(limit, windowMs);
    return {
      take: (tenant) => limiter.takeAll(items(tenant)).then((r) => r.allowed),
      close: () => client.close(),
    };
  },
};

/**
 * The reference for `sluice-takeall3`: the same three limits as three independent `take`s
 * (issued together, so coalesced into one script call; not all-or-nothing: an item that
 * fits is counted even when another denies). Allowed when all three admit. What three
 * separate keys cost without the atomic batch. In the correctness gate the three counters
 * fill together, so the first 10 of 30 are allowed on all three, the rest denied on all.
 */
export const take3Contender: Contender = {
  name: 'sluice-take3',
  description: 'as sluice-takeall3, as 3 independent takes (Promise.all; not all-or-nothing)',
  async setup(url, { limit, windowMs }) {
    const client = await connectRedis({ url });
    const limiter = new RateLimiter({ client });
    const items = stackedItems(limit, windowMs);
    return {
      take: (tenant) =>
        Promise.all(items(tenant).map((item) => limiter.take(item.scope, item.policy))).then(
          (decisions) => decisions.every((d) => d.allowed),
        ),
      close: () => client.close(),
    };
  },
};

/**
 * Three stacked fixedWindow limits of one tenant: tenant-wide, per route, per route + user,
 * the user one of the tenant's 20 (`stackedUser`, drawn uniformly per request).
 */
function stackedItems(limit: number, windowMs: number): (tenant: string) => TakeAllItem[] {
  const tenantWide = fixedWindow({ limit, windowMs, name: 'bench-tenant' });
  const perRoute = fixedWindow({ limit, windowMs, name: 'bench-route' });
  const perUser = fixedWindow({ limit, windowMs, name: 'bench-user' });
  return (tenant) => [
    { scope: { tenant }, policy: tenantWide },
    { scope: { tenant, route: ROUTE }, policy: perRoute },
    { scope: { tenant, route: ROUTE, user: stackedUser() }, policy: perUser },
  ];
}

/**
 * As sluice, with metrics on: `prometheusMetrics()` on a fresh prom-client `Registry`, given
 * to the limiter and to `connectRedis`, and the registry read as Prometheus would scrape
 * it, once a second (more often than the usual 15 s), inside the measured span. Against
 * `sluice`: what metrics cost ("metrics on vs off", bench/metrics/).
 */
export const metricsContender: Contender = {
  name: 'sluice-metrics',
  description:
    'as sluice, with prometheusMetrics() on the limiter and its client (a fresh prom-client Registry, scraped every 1 s)',
  async setup(url, { limit, windowMs }) {
    const { Registry } = await import('prom-client');
    const { prometheusMetrics } =
      await sluiceModule<typeof import('../../src/metrics/prometheus.js')>('metrics/prometheus');
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    const client = await connectRedis({ url, metrics });
    const limiter = new RateLimiter({ client, metrics });
    const policy = fixedWindow({ limit, windowMs });
    let scraped = '';
    const scrape = setInterval(() => {
      registry.metrics().then(
        (text) => {
          scraped = text;
        },
        () => {},
      );
    }, 1000);
    return {
      take: (tenant) => limiter.take({ tenant, route: ROUTE }, policy).then((d) => d.allowed),
      close: async () => {
        clearInterval(scrape);
        if (scraped !== '' && !scraped.includes('sluice_decisions_total')) {
          throw new Error('sluice-metrics: the scrape lacks sluice_decisions_total');
        }
        await client.close();
      },
    };
  },
};
