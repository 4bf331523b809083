/**
 * Workloads: which key each call takes and under which policy.
 *
 * - `random`: a tenant drawn uniformly from 1e6, limit 1000 per 60 s, so nearly every take is
 *   allowed and most create or update a distinct key (the write path).
 * - `hot`: one key, limit 10 per 60 s, so nearly every take is a denial (the read path).
 */
import type { BenchPolicy } from './types.js';

export interface Scenario {
  readonly name: string;
  readonly description: string;
  readonly policy: BenchPolicy;
  /** The key (tenant) of the next take. */
  nextKey(): string;
}

const KEYSPACE = 1_000_000;

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
};

export const scenarioNames = Object.keys(scenarios);

export function getScenario(name: string): Scenario {
  const scenario = scenarios[name];
  if (scenario === undefined) {
    throw new Error(`unknown scenario "${name}" (known: ${scenarioNames.join(', ')})`);
  }
  return scenario;
}
