/**
 * A scope's block, for `sluice inspect`: read (never written) from its key beside the scope's,
 * `<key>:b` (see `algorithms/block.lua`), whose TTL is what is left of the block plus the
 * policy's escalation period (`withinMs`, 0 without escalation) and whose value is the number
 * of blocks so far within that period.
 */
import type { Policy } from '../types.js';
import type { Client } from './common.js';

/** A scope's block now. */
export interface BlockState {
  /** The policy's first block, ms. */
  readonly blockMs: number;
  /** Ms until the scope's block ends; 0 when it is not blocked now. */
  readonly blockedForMs: number;
  /** The blocks so far within the escalation period (0: none remembered, or no escalation). */
  readonly level: number;
}

/** The block of the scope `key` of `policy`, or undefined when the policy has no `blockMs`. */
export async function blockState(
  client: Client,
  policy: Policy,
  key: string,
): Promise<BlockState | undefined> {
  const block = policy.block;
  if (block === undefined) return undefined;
  const at = `${key}:b`;
  const pttl = Number(await client.client.sendCommand(['PTTL', at]));
  if (pttl <= 0) return { blockMs: block.blockMs, blockedForMs: 0, level: 0 };
  const level = Number(await client.client.sendCommand(['GET', at]));
  return {
    blockMs: block.blockMs,
    blockedForMs: Math.max(pttl - block.withinMs, 0),
    level: block.factor > 1 && Number.isSafeInteger(level) && level > 0 ? level : 0,
  };
}

/** `blocked for 42 s (block 2 within the escalation period)`, or `not blocked now (…)`. */
export function blockWords(state: BlockState, duration: (ms: number) => string): string {
  if (state.blockedForMs > 0) {
    const level = state.level === 0 ? '' : ` (block ${state.level} within the escalation period)`;
    return `blocked for ${duration(state.blockedForMs)}${level}`;
  }
  return state.level === 0
    ? `not blocked now (blocks of ${duration(state.blockMs)})`
    : `not blocked now (${state.level} within the escalation period: the next lasts longer)`;
}
