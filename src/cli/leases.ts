/**
 * The live leases of a concurrency limit's scope, for `sluice inspect`: read (never written)
 * from its sorted set — the members whose expiry is after Redis's time now, soonest first.
 */
import { isConcurrency } from '../algorithms/concurrency.js';
import type { Policy } from '../types.js';
import type { Client } from './common.js';

/** Most leases `inspect` lists per scope (the count is always complete). */
export const MAX_LISTED_LEASES = 100;

/** One live lease: its id and the ms until it expires unless renewed. */
export interface LiveLease {
  readonly id: string;
  readonly expiresInMs: number;
}

/** The live leases of `key` (soonest to expire first, at most 100), or undefined for a rate policy. */
export async function liveLeases(
  client: Client,
  policy: Policy,
  key: string,
): Promise<LiveLease[] | undefined> {
  if (!isConcurrency(policy)) return undefined;
  const [seconds, micros] = (await client.client.sendCommand(['TIME'])) as [string, string];
  const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  const reply = (await client.client.sendCommand([
    'ZRANGEBYSCORE',
    key,
    `(${now}`,
    '+inf',
    'WITHSCORES',
    'LIMIT',
    '0',
    String(MAX_LISTED_LEASES),
  ])) as unknown[];
  // Flat (RESP2) or pairs (RESP3): member, score, member, score…
  const flat = reply.flat() as (string | number)[];
  const leases: LiveLease[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const expiry = Number(flat[i + 1]);
    const expiresInMs = Math.min(Math.ceil(expiry - now), policy.horizonMs);
    leases.push({ id: String(flat[i]), expiresInMs });
  }
  return leases;
}

/** The leases in words: `2 held: job-1 (expires in 12 s), job-2 (…)`. */
export function leaseWords(leases: readonly LiveLease[], duration: (ms: number) => string): string {
  if (leases.length === 0) return 'none held';
  const listed = leases.map((l) => `${l.id} (expires in ${duration(l.expiresInMs)})`).join(', ');
  const more = leases.length === MAX_LISTED_LEASES ? ' (the first 100)' : '';
  return `${leases.length} held${more}: ${listed}`;
}
