/**
 * The calls in flight: one object per call that is at once its deadline entry and its batch
 * request, so that a take costs one object besides its promise and its target. Each kind
 * says what it sends (its items) and hands its reply to the {@link Settler}.
 */
import type { BatchOp, WireItem } from '../algorithms/batch-wire.js';
import type { LuaScript } from '../algorithms/script.js';
import type { Decision, TakeAllResult } from '../types.js';
import type { BatchRequest } from './coalescer.js';
import type { DeadlineEntry } from './deadline.js';
import type { CallMeta } from './events.js';
import type { Target } from './targets.js';

/** What settles calls: counts, caches, reports and resolves their outcome (`outcomes.ts`). */
export interface Settler {
  answered(call: Call, reply: readonly unknown[], offset: number, sentAt: number): void;
  groupAnswered(call: GroupCall, reply: readonly unknown[], offset: number, sentAt: number): void;
  deleted(call: ResetCall, existed: boolean): void;
  /** A reserve, settle, refund or charge answered (see `priced.ts`): `finish` decodes it. */
  pricedAnswered(call: PricedAnswer, reply: readonly unknown[], offset: number): void;
  /** `counted`: the in-flight count was already decremented for this answer. */
  failed(call: InFlight, error: unknown, counted?: boolean): void;
  expired(call: InFlight): void;
}

/** A priced call as its settler sees it. */
export interface PricedAnswer extends InFlight {
  finish(reply: readonly unknown[], offset: number): void;
}

const NO_ARGS: readonly string[] = Object.freeze([]);

/** What every call in flight shares. */
export abstract class InFlight implements DeadlineEntry, BatchRequest {
  deadline = 0;
  settled = false;
  /** What decision events need, when the limiter reports them. */
  meta: CallMeta | undefined = undefined;
  /** Waiting for the store's first connection, not sent yet (see `start-gate.ts`). */
  held = false;
  abstract readonly op: BatchOp;
  abstract readonly size: number;
  abstract readonly work: number;
  abstract readonly script: LuaScript | undefined;
  abstract readonly key: string;
  abstract readonly args: readonly string[];
  abstract readonly firstKey: string;

  constructor(
    readonly settler: Settler,
    readonly reject: (error: Error) => void,
  ) {}

  abstract item(j: number): WireItem;
  abstract done(reply: readonly unknown[], offset: number, sentAt: number): void;

  fail(error: Error): void {
    this.settler.failed(this, error);
  }

  expire(): void {
    this.settler.expired(this);
  }
}

/** One take or peek in flight. */
export class Call extends InFlight {
  readonly size: number = 1;
  /** A lone take goes as its algorithm's own script; a peek always as a batch (dry). */
  readonly script: LuaScript | undefined;

  constructor(
    settler: Settler,
    readonly op: 't' | 'p' | 'i',
    readonly target: Target,
    readonly resolve: (decision: Decision) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, reject);
    // A policy with blocks always goes as a batch item (its block is decided there).
    this.script =
      op === 't' && target.policy.block === undefined ? target.policy.script : undefined;
  }

  get work(): number {
    return this.target.work;
  }

  get key(): string {
    return this.target.key;
  }

  get args(): readonly string[] {
    return this.target.args;
  }

  get firstKey(): string {
    return this.target.key;
  }

  item(): WireItem {
    return this.target;
  }

  done(reply: readonly unknown[], offset: number, sentAt: number): void {
    this.settler.answered(this, reply, offset, sentAt);
  }
}

/** One `takeAll` in flight. */
export class GroupCall extends InFlight {
  readonly op: 't' | 'i' = 't';
  readonly script = undefined;
  readonly key = '';
  readonly args = NO_ARGS;
  readonly size: number;
  readonly work: number;

  constructor(
    settler: Settler,
    readonly targets: readonly Target[],
    readonly resolve: (result: TakeAllResult) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, reject);
    this.size = targets.length;
    // Each item decided dry, then taken or probed: twice an item's work.
    let work = 0;
    for (const target of targets) work += 2 * target.work;
    this.work = work;
  }

  get firstKey(): string {
    return (this.targets[0] as Target).key;
  }

  item(j: number): WireItem {
    return this.targets[j] as Target;
  }

  done(reply: readonly unknown[], offset: number, sentAt: number): void {
    this.settler.groupAnswered(this, reply, offset, sentAt);
  }
}

/** One `reset` in flight: the key's UNLINK, then the namespace's new reset epoch. */
export class ResetCall extends InFlight implements WireItem {
  readonly op = 'r' as const;
  readonly size = 1;
  readonly work = 2; // one UNLINK
  readonly script = undefined;
  readonly args = NO_ARGS;
  readonly batchId = 0;

  constructor(
    settler: Settler,
    readonly target: Target,
    readonly resolve: (existed: boolean) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, reject);
  }

  get key(): string {
    return this.target.key;
  }

  get firstKey(): string {
    return this.target.key;
  }

  item(): WireItem {
    return this;
  }

  done(reply: readonly unknown[], offset: number): void {
    this.settler.deleted(this, reply[offset] === 1);
  }
}
