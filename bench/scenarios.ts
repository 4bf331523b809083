/**
 * Workloads: which key each call takes and under which policy.
 *
 * - `random`: a tenant drawn uniformly from 1e6, limit 1000 per 60 s, so nearly every take is
 *   allowed and most create or update a distinct key (the write path).
 * - `hot`: one key, limit 10 per 60 s, so nearly every take is a denial (the read path).
 * - `zipf`: a multi-tenant API: 10,000 tenants drawn from a Zipf distribution (s = 1.1: the
 *   busiest tenant sends 15 % of the requests, the ten busiest 41 %),
 *   limit 1,000,000 per 60 s, so every take is allowed and most update a key that exists (the
 *   update path). The stacked contenders (`sluice-takeall3`, `rate-limiter-flexible-3`) take
 *   three limits per request: tenant-wide, per route and per user. At C=16 and C=256 only.
 */
import type { BenchPolicy } from './types.js';

export interface Scenario {
  readonly name: string;
  readonly description: string;
  readonly policy: BenchPolicy;
  /** The concurrencies it runs at, of those asked for (all when absent). */
  readonly concurrency?: readonly number[];
  /** The key (tenant) of the next take. */
  nextKey(): string;
}

const KEYSPACE = 1_000_000;

/** Zipf(s) over `n` ranks: a sampler by binary search in the cumulative weights. */
export function zipfSampler(n: number, s: number, random = Math.random): () => number {
  const cumulative = new Float64Array(n);
  let total = 0;
  for (let k = 1; k <= n; k++) {
    total += 1 / k ** s;
    cumulative[k - 1] = total;
  }
  return () => {
    const x = random() * total;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((cumulative[mid] as number) < x) lo = mid + 1;
      else hi = mid;
    }
    return lo + 1;
  };
}

const ZIPF_TENANTS = 10_000;
const ZIPF_S = 1.1;
const zipfRank = zipfSampler(ZIPF_TENANTS, ZIPF_S);

export const scenarios: Record<string, Scenario> = {
  random: {
    name: 'random',
    description: 'uniform random tenant out of 1e6, limit 1000 / 60 s (mostly allowed)',
    policy: { limit: 1000, windowMs: 60_000 },
    nextKey: () => `t${Math.floor(Math.random() * KEYSPACE)}`,
  },
  hot: {
    name: 'hot',
    description: 'one tenant, limit 10 / 60 s (almost all denied)',
    policy: { limit: 10, windowMs: 60_000 },
    nextKey: () => 'hot',
  },
  zipf: {
    name: 'zipf',
    description: `Zipf-distributed tenant (${ZIPF_TENANTS.toLocaleString('en-US')} tenants, s = ${ZIPF_S}), limit 1,000,000 / 60 s (all allowed; hot tenants update their keys)`,
    policy: { limit: 1_000_000, windowMs: 60_000 },
    concurrency: [16, 256],
    nextKey: () => `z${zipfRank()}`,
  },
};

export const scenarioNames = Object.keys(scenarios);

export function getScenario(name: string): Scenario {
  const scenario = scenarios[name];
  if (scenario === undefined) {
    throw new Error(`unknown scenario "${name}" (known: ${scenarioNames.join(', ')})`);
  }
  return scenario;
}
