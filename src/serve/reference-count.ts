/**
 * `--compat reference`: the reference service's counting, one atomic script call per request
 * (`reference-count.lua`), with its in-memory twin for the model test.
 */
import { loadScript } from '../algorithms/script.js';
import { digest } from '../key.js';
import type { ScriptStore } from '../stores/store.js';

/** The script: KEYS are the request's counters (any number); ARGV as in the `.lua`. */
export const REFERENCE_COUNT = loadScript('reference-count', import.meta.url, 0);

/** One descriptor to count: its counter's identity, hits, limit and unit. */
export interface CountItem {
  /** The counter's key (see {@link referenceKey}). */
  readonly key: string;
  /** Hits to add, an integer >= 0 (0: read only). */
  readonly hits: number;
  readonly limit: number;
  readonly unitMs: number;
}

/** One descriptor's count after the call. */
export interface Count {
  readonly count: number;
  readonly over: boolean;
  readonly resetMs: number;
}

/**
 * The key of a reference counter: `<prefix>ref:{<domain digest>}:<digest of the domain, the
 * counted descriptor and the unit>` — every counter of one domain in one hash slot, so that a
 * request's counters are one atomic call on Redis Cluster too.
 */
export function referenceKey(
  prefix: string,
  domain: string,
  counted: readonly string[],
  unitMs: number,
) {
  return `${prefix}ref:{${digest([domain], 16)}}:${digest([domain, counted, unitMs])}`;
}

/** Counts the items in one script call. */
export async function countReference(
  store: ScriptStore,
  items: readonly CountItem[],
  stop: boolean,
): Promise<Count[]> {
  const args: string[] = [stop ? '1' : '0'];
  for (const item of items) args.push(String(item.hits), String(item.limit), String(item.unitMs));
  const reply = (await store.evalScript(
    REFERENCE_COUNT,
    items.map((i) => i.key),
    args,
  )) as readonly unknown[];
  return items.map((_, i) => ({
    count: Number(reply[3 * i]),
    over: Number(reply[3 * i + 1]) === 1,
    resetMs: Number(reply[3 * i + 2]),
  }));
}

/** The twin: the same counting on a map and a clock, for the model test. */
export class ReferenceCountTwin {
  readonly #counters = new Map<string, { count: number; endsAt: number }>();

  count(now: number, items: readonly CountItem[], stop: boolean): Count[] {
    const state = items.map((item) => {
      const end = (Math.floor(now / item.unitMs) + 1) * item.unitMs;
      const live = this.#counters.get(item.key);
      const count = live !== undefined && live.endsAt > now ? live.count : 0;
      return { item, end, count };
    });
    const anyOver = state.some((s) => s.count + s.item.hits > s.item.limit);
    return state.map(({ item, end, count }) => {
      const write = item.hits > 0 && !(stop && anyOver);
      let after = count;
      if (write) {
        after = count + item.hits;
        const live = this.#counters.get(item.key);
        const endsAt = live !== undefined && live.endsAt > now ? Math.min(live.endsAt, end) : end;
        this.#counters.set(item.key, { count: after, endsAt });
      }
      const over = write ? after > item.limit : after + item.hits > item.limit;
      return { count: after, over, resetMs: end - now };
    });
  }
}
