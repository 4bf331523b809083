/**
 * Prefetched quota for hot scopes (see `docs/prefetch.md`): a take of cost 1 on a policy with
 * `prefetch: { maxUnits }` (a fixed window) is answered from a local grant when this replica
 * holds one; else one script call (batch op `w`, `settle/prefetch.lua`) decides that take
 * and takes a grant of up to `maxUnits` more units of the window, consumed in Redis at once:
 * the fleet never admits more than the limit, whatever each replica does with its grant.
 *
 * - The grant shrinks as the window fills: at most an eighth of what the window has left
 *   after the take, so the last 8 units are decided in Redis one take at a time.
 * - Takes that arrive while a grant call is in flight wait for it (one call per scope at a
 *   time); those it cannot serve send the next.
 * - A grant is refilled ahead: the local take that leaves it at half of `maxUnits` or less
 *   sends the next grant call without waiting for it, asking for what tops the units held up
 *   to `maxUnits` (the call's own take of 1 joins them: no take waits on it). So the takes of
 *   a hot scope do not stall on a round trip each time a grant runs out, and a replica never
 *   holds more than `maxUnits` units of a scope. A refill refused (the window is full) stops
 *   refills of that scope until its units run out; the next take then goes to Redis.
 * - A grant is used until `GIVE_BACK_MARGIN_MS` before its window ends (on this process's
 *   clock, from the moment the call was sent: never later than Redis's end); then, and at
 *   `close()`, its unused units go back into that window only (batch op `y`, which changes
 *   nothing once another window began). A crash strands at most `maxUnits` units per replica
 *   per scope and window: they end with the window.
 * - Every answer is counted (`allowed`, `limited`) and reported as a take's decision; a local
 *   one with `cached: true` (no round trip). Its `remaining` is what the window had left at
 *   this replica's last grant call plus the grant's unused units (other replicas' takes since
 *   are not seen); its `resetMs` the time left in the window, as that call saw it.
 */
import type { WireItem } from '../algorithms/batch-wire.js';
import { decodeDecision } from '../algorithms/batch-wire.js';
import { StoreError } from '../errors.js';
import type { Decision } from '../types.js';
import { InFlight, type Settler } from './calls.js';
import type { CallMeta, DecisionReporter } from './events.js';
import { ScopeTable } from './scope-table.js';
import type { LimiterStats } from './stats.js';
import type { Target } from './targets.js';

/** How long before its window ends a grant stops admitting and gives its units back, in ms. */
export const GIVE_BACK_MARGIN_MS = 20;

/** Most scopes holding a grant or a grant call at once; beyond, takes go the usual way. */
export const MAX_PREFETCH_SCOPES = 4096;

/** Estimated µs of Redis time of a grant besides its take (a GET, a SET, two PEXPIRETIME). */
const PREFETCH_WORK = 8;

/** What the prefetcher needs of its limiter. */
export interface PrefetchHost {
  readonly settler: Settler;
  readonly stats: LimiterStats;
  readonly reporter: DecisionReporter | undefined;
  /** The limiter's path for a call: in-flight cap, deadline, coalescer. */
  send<T>(
    make: (resolve: (value: T) => void, reject: (error: Error) => void) => InFlight,
  ): Promise<T>;
  /** A grant call refused `target`'s take: the denial cache may hold it. */
  refused(target: Target, decision: Decision, sentAt: number): void;
  /** Units went back to `target`'s scope: cached denials of it no longer hold. */
  gaveBack(target: Target): void;
  /** A take of `target` the usual way (the denial cache, then Redis), counted as usual. */
  alone(target: Target, requestId: string | undefined): Promise<Decision>;
}

/** A grant call or a give-back in flight. */
class PrefetchCall extends InFlight {
  readonly script = undefined;
  readonly size: number;
  readonly work: number;
  readonly #item: WireItem;
  readonly #marker: WireItem;

  constructor(
    settler: Settler,
    readonly op: 'w' | 'y',
    readonly target: Target,
    readonly args: readonly string[],
    readonly finish: (reply: readonly unknown[], offset: number) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, reject);
    this.#item = { key: target.key, batchId: target.batchId, args };
    this.#marker = { key: target.key, batchId: 0, args: [] };
    this.size = op === 'w' ? 2 : 1;
    this.work = target.work + PREFETCH_WORK;
  }

  get key(): string {
    return this.target.key;
  }

  get firstKey(): string {
    return this.target.key;
  }

  item(j: number): WireItem {
    return j === 0 ? this.#item : this.#marker;
  }

  done(reply: readonly unknown[], offset: number): void {
    this.settler.pricedAnswered(this, reply, offset);
  }
}

interface Waiter {
  readonly target: Target;
  readonly requestId: string | undefined;
  readonly startedAt: number;
  readonly resolve: (decision: Decision) => void;
  readonly reject: (error: Error) => void;
}

/** One scope's grant and the takes waiting for the next. */
interface Slot {
  readonly target: Target;
  /** Unused units of the grant (0: none). */
  units: number;
  /** The window the grant came from (see `settle/fixed-window.lua`). */
  mark: number;
  /** What the window had left after the grant call. */
  left: number;
  /** `performance.now()` when the window ends (as the grant call saw it). */
  windowEnd: number;
  /** `performance.now()` after which the grant admits nothing. */
  usableUntil: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  fetching: boolean;
  /** A refill was refused: no refill ahead until a grant call admits again. */
  full: boolean;
  /**
   * `reset` forgot this slot while its grant call was in flight: the call's grant went with
   * the deleted window (see `#staleAnswer`).
   */
  stale: boolean;
  waiters: Waiter[];
}

/** A grant call's answer. */
interface Granted {
  readonly decision: Decision;
  readonly granted: number;
  readonly mark: number;
}

export class Prefetcher {
  readonly #slots = new ScopeTable<Slot>();
  readonly #returns = new Set<Promise<unknown>>();
  #closed = false;

  constructor(readonly host: PrefetchHost) {}

  /**
   * Answers a take of `target` from a grant, or through a grant call; undefined when the take
   * goes the usual way (cost > 1, closed, too many scopes, the window's last moments).
   */
  take(target: Target, requestId: string | undefined): Promise<Decision> | undefined {
    if (this.#closed || target.cost !== 1) return undefined;
    const now = performance.now();
    let slot = this.#slots.get(target.policy, target.parts);
    if (slot !== undefined) {
      if (slot.units > 0 && now < slot.usableUntil) {
        const decision = this.#local(slot, target, requestId, 0, now);
        if (!slot.fetching && !slot.full && 2 * slot.units <= maxUnitsOf(target)) {
          this.#fetch(slot);
        }
        return Promise.resolve(decision);
      }
      // The window's last moments: its units are going back; takes go one by one.
      if (now >= slot.usableUntil && now < slot.windowEnd && !slot.fetching) {
        if (slot.units > 0) this.#giveBack(slot);
        return undefined;
      }
    }
    if (slot === undefined) {
      if (this.#slots.size >= MAX_PREFETCH_SCOPES) return undefined;
      slot = {
        target,
        units: 0,
        mark: 0,
        left: 0,
        windowEnd: 0,
        usableUntil: 0,
        timer: undefined,
        fetching: false,
        full: false,
        stale: false,
        waiters: [],
      };
      this.#slots.set(target.policy, target.parts, slot);
    }
    const held = slot;
    return new Promise<Decision>((resolve, reject) => {
      held.waiters.push({ target, requestId, startedAt: now, resolve, reject });
      if (!held.fetching) this.#fetch(held);
    });
  }

  /**
   * The scope was reset: its grant's window is gone (nothing to give back), and so is the
   * grant of a call in flight, sent before the reset. Later takes start a new slot.
   */
  forget(target: Target): void {
    const slot = this.#slots.get(target.policy, target.parts);
    if (slot === undefined) return;
    slot.units = 0;
    slot.stale = true;
    this.#stopTimer(slot);
    this.#slots.delete(target.policy, target.parts);
  }

  /** Gives every unused unit back and stops prefetching; resolves once Redis answered. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const slot of this.#slots.values()) this.#giveBack(slot);
    while (this.#returns.size > 0) await Promise.allSettled([...this.#returns]);
  }

  /** A take admitted from `slot`'s grant. */
  #local(
    slot: Slot,
    target: Target,
    requestId: string | undefined,
    startedAt: number,
    now: number,
  ): Decision {
    slot.units--;
    const decision: Decision = {
      allowed: true,
      remaining: slot.left + slot.units,
      limit: target.policy.limit,
      resetMs: Math.max(0, Math.ceil(slot.windowEnd - now)),
      retryAfterMs: 0,
    };
    this.#count(target, requestId, startedAt, decision, true);
    return decision;
  }

  #count(
    target: Target,
    requestId: string | undefined,
    startedAt: number,
    decision: Decision,
    local: boolean,
  ): void {
    const { stats, reporter } = this.host;
    if (decision.allowed) stats.allowed++;
    else stats.limited++;
    if (reporter !== undefined) {
      const meta: CallMeta = { targets: [target], operation: 'take', requestId, startedAt };
      reporter.report(meta, decision.allowed ? 'allowed' : 'limited', local, [decision]);
    }
  }

  /**
   * Sends `slot`'s grant call: for its first waiter when units ran out (asking `maxUnits` more
   * units), or ahead (asking what tops the units held up to `maxUnits`, the call's take
   * included).
   */
  #fetch(slot: Slot): void {
    slot.fetching = true;
    const { target } = slot;
    const maxUnits = maxUnitsOf(target);
    // Sent ahead (nobody waits yet), the call's own take of 1 may join the units: one less.
    const ask = slot.waiters.length > 0 ? maxUnits : Math.max(0, maxUnits - slot.units - 1);
    const sentAt = performance.now();
    const call = this.host
      .send<Granted>(
        (resolve, reject) =>
          new PrefetchCall(
            this.host.settler,
            'w',
            target,
            [...target.args, String(ask)],
            (reply, offset) => {
              const granted = decodeGrant(reply, offset, target.policy.limit);
              if (granted === undefined) reject(new StoreError('ERR unexpected reply to a grant'));
              else resolve(granted);
            },
            reject,
          ),
      )
      .then(
        (granted) => this.#granted(slot, granted, sentAt),
        (error: Error) => {
          slot.fetching = false;
          const waiters = slot.waiters;
          slot.waiters = [];
          for (const waiter of waiters) waiter.reject(error);
          if (slot.units === 0) this.#clear(slot);
        },
      );
    // `close()` waits for it: a refill's units go back once it is answered.
    this.#returns.add(call);
    void call.then(() => this.#returns.delete(call));
  }

  #granted(slot: Slot, { decision, granted, mark }: Granted, sentAt: number): void {
    slot.fetching = false;
    const waiters = slot.waiters;
    slot.waiters = [];
    if (slot.stale) {
      this.#staleAnswer(decision, waiters);
      return;
    }
    // A refill ahead that nobody waited for: its admitted take of 1 joins the units.
    const head: Waiter | undefined = waiters[0];
    if (!decision.allowed) {
      slot.full = slot.units > 0;
      // While units are held, takes must reach them: the denial is not cached yet.
      if (!slot.full) this.host.refused(slot.target, decision, sentAt);
      for (const waiter of waiters) {
        this.#count(waiter.target, waiter.requestId, waiter.startedAt, decision, false);
        waiter.resolve(decision);
      }
      if (slot.units === 0) this.#clear(slot);
      return;
    }
    slot.full = false;
    // Units of the same window add up; those of an earlier window (it just turned) go back.
    let held = 0;
    if (slot.units > 0) {
      if (slot.mark === mark) held = slot.units;
      else this.#sendBack(slot.target, slot.units, slot.mark);
    }
    this.#stopTimer(slot);
    slot.units = held + granted + (head === undefined ? 1 : 0);
    slot.mark = mark;
    slot.left = decision.remaining;
    slot.windowEnd = sentAt + decision.resetMs;
    slot.usableUntil = slot.windowEnd - GIVE_BACK_MARGIN_MS;
    let i = 0;
    const now = performance.now();
    if (head !== undefined) {
      // The window's end as this process knows it (a waiter may have come long after the
      // call was sent: Redis's resetMs was measured before it came).
      const first: Decision = {
        ...decision,
        remaining: decision.remaining + slot.units,
        resetMs: Math.max(0, Math.ceil(slot.windowEnd - now)),
      };
      this.#count(head.target, head.requestId, head.startedAt, first, false);
      head.resolve(first);
      i = 1;
    }
    if (now < slot.usableUntil) {
      for (; i < waiters.length && slot.units > 0; i++) {
        const waiter = waiters[i] as Waiter;
        waiter.resolve(this.#local(slot, waiter.target, waiter.requestId, waiter.startedAt, now));
      }
    }
    slot.waiters = waiters.slice(i);
    if (slot.waiters.length > 0) this.#fetch(slot);
    if (this.#closed || now >= slot.usableUntil) this.#giveBack(slot);
    else if (slot.units > 0) {
      slot.timer = setTimeout(() => this.#giveBack(slot), slot.usableUntil - now);
      slot.timer.unref?.();
    } else this.#clear(slot);
  }

  /**
   * The answer of a grant call sent before `reset` forgot its slot. Its take was decided
   * before the reset, and answers the first waiter; its grant was consumed in the deleted
   * window and goes with it (admitting from it would admit into the next window units it
   * never counted); a refusal is not cached (it was of the deleted window). The other
   * waiters are taken afresh.
   */
  #staleAnswer(decision: Decision, waiters: readonly Waiter[]): void {
    const [head, ...rest] = waiters;
    if (head !== undefined) {
      this.#count(head.target, head.requestId, head.startedAt, decision, false);
      head.resolve(decision);
    }
    for (const waiter of rest) {
      const again =
        this.take(waiter.target, waiter.requestId) ??
        this.host.alone(waiter.target, waiter.requestId);
      again.then(waiter.resolve, waiter.reject);
    }
  }

  /** Sends `slot`'s unused units back into their window. */
  #giveBack(slot: Slot): void {
    const units = slot.units;
    slot.units = 0;
    this.#clear(slot);
    if (units > 0) this.#sendBack(slot.target, units, slot.mark);
  }

  #sendBack(target: Target, units: number, mark: number): void {
    const done = this.host
      .send<number>(
        (resolve, reject) =>
          new PrefetchCall(
            this.host.settler,
            'y',
            target,
            [...target.args, String(units), String(mark)],
            (reply, offset) => resolve(Number(reply[offset + 1])),
            reject,
          ),
      )
      .then(
        (applied) => {
          if (applied < 0) this.host.gaveBack(target);
        },
        // Not given back (Redis unreachable, a timeout): the units end with their window.
        () => {},
      );
    this.#returns.add(done);
    void done.then(() => this.#returns.delete(done));
  }

  #stopTimer(slot: Slot): void {
    if (slot.timer !== undefined) clearTimeout(slot.timer);
    slot.timer = undefined;
  }

  /**
   * Stops `slot`'s timer; drops it once it holds nothing and nobody waits — at its window's
   * end when that is near (until then its takes go one by one, see `take`).
   */
  #clear(slot: Slot): void {
    this.#stopTimer(slot);
    if (slot.units > 0 || slot.fetching || slot.waiters.length > 0) return;
    const left = slot.windowEnd - performance.now();
    if (left > 0 && left <= 2 * GIVE_BACK_MARGIN_MS && !this.#closed) {
      slot.timer = setTimeout(() => this.#clear(slot), left);
      slot.timer.unref?.();
    } else if (this.#slots.get(slot.target.policy, slot.target.parts) === slot) {
      this.#slots.delete(slot.target.policy, slot.target.parts);
    }
  }
}

function maxUnitsOf(target: Target): number {
  return target.policy.prefetch?.maxUnits ?? 0;
}

/** A grant call's reply: the take's decision, the extra units granted, their window. */
function decodeGrant(
  reply: readonly unknown[],
  offset: number,
  limit: number,
): Granted | undefined {
  const allowed = reply[offset] === 1;
  const decision = decodeDecision(reply, offset, limit);
  if (decision === undefined) return undefined;
  if (!allowed) return { decision, granted: 0, mark: 0 };
  const granted = Number(reply[offset + 3]);
  const mark = Number(reply[offset + 4]);
  return { decision: { ...decision, retryAfterMs: 0 }, granted, mark };
}
