/**
 * Serving a retry-safe admission at most once: `claimServe(items, id)` claims the id of a
 * take (or takeAll) with an `id` for running its work, once. A retry-safe take replays its
 * first admission to every repeat, so a caller that runs its work on "admitted" would run it
 * again for each repeat without spending quota (an HTTP client reusing an `Idempotency-Key`).
 * The claim is a `SET NX` with the record's TTL (the policies' longest horizon), on a key
 * next to the id's record (`<record>:c`, the tenant's slot, op `c` in `batch.lua`): the
 * first claim of an id within the horizon wins, every later one (a replay, a concurrent
 * copy) is refused. Claim after the admission, before the work; the HTTP guard does (see
 * its `retryId` option).
 */
import type { WireItem } from '../algorithms/batch-wire.js';
import { InFlight, type Settler } from './calls.js';
import { recordItem } from './retry-safe.js';
import type { Target } from './targets.js';

/** The claim item of `id` on `targets`: next to the id's record, with the record's TTL. */
export function claimItem(targets: readonly Target[], id: string): WireItem {
  const record = recordItem(targets, id);
  return { key: `${record.key}:c`, batchId: 0, args: [record.args[0] as string] };
}

/** One claim in flight. */
export class ClaimCall extends InFlight {
  readonly op = 'c' as const;
  readonly size = 1;
  readonly work = 2; // one SET
  readonly script = undefined;

  constructor(
    settler: Settler,
    readonly claim: WireItem,
    readonly resolve: (claimed: boolean) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, reject);
  }

  get key(): string {
    return this.claim.key;
  }

  get firstKey(): string {
    return this.claim.key;
  }

  get args(): readonly string[] {
    return this.claim.args;
  }

  item(): WireItem {
    return this.claim;
  }

  done(reply: readonly unknown[], offset: number): void {
    this.settler.pricedAnswered(this, reply, offset);
  }

  finish(reply: readonly unknown[], offset: number): void {
    this.resolve(reply[offset] === 1);
  }
}
