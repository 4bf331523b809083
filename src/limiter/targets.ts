/**
 * The first step of every call: its input, checked, as targets. A target is one validated
 * scope under one policy with its cost — what a call sends (its key, its algorithm's batch
 * id, its ARGV) and what the local denial cache is keyed by. Every field is read once, so
 * the values used are the values checked; bad input is an `InvalidInputError` naming the
 * field, and nothing is sent.
 */
import { batchId, batchWork } from '../algorithms/batch.js';
import type { WireItem } from '../algorithms/batch-wire.js';
import { isConcurrency, type LeaseAction, leaseArgs } from '../algorithms/concurrency.js';
import { isPolicy } from '../algorithms/policy.js';
import { MAX_SCOPE_PART_LENGTH, MAX_TAKE_ALL_ITEMS } from '../bounds.js';
import { InvalidInputError } from '../errors.js';
import { scopeKey, tenantTag } from '../key.js';
import type { Policy, Scope, TakeAllItem, TakeAllOptions, TakeOptions } from '../types.js';
import { onlyKnownKeys, positiveSafeInteger, readProperty } from '../validate.js';

/** A validated scope: its parts as read once. */
export interface ScopeParts {
  readonly tenant: string;
  readonly route: string | undefined;
  readonly user: string | undefined;
}

/**
 * Scopes whose parts add up to more characters than this are cached under their Redis key
 * (a hash), so that the denial cache's memory stays small per entry whatever the ids hold.
 */
const LOCAL_KEY_MAX_TEXT = 256;

/** Redis work of a policy's block per item, estimated µs (bench/script-time.ts). */
const BLOCK_WORK = 8;

/** The keys of a scope, of a take's options and of a takeAll's items and options. */
const SCOPE_KEYS: readonly string[] = ['tenant', 'route', 'user'];
const TAKE_OPTION_KEYS: readonly string[] = ['cost', 'requestId', 'id'];
const ITEM_KEYS: readonly string[] = ['scope', 'policy', 'cost'];
const TAKE_ALL_OPTION_KEYS: readonly string[] = ['requestId', 'id'];

/** One validated scope under one policy: what a call sends and caches. */
export class Target implements WireItem {
  #key: string | undefined;
  #localKey: string | undefined;

  constructor(
    readonly namespace: string,
    readonly parts: ScopeParts,
    readonly policy: Policy,
    readonly batchId: number,
    /** Redis work of its item, estimated µs (see `BatchRequest.work`). */
    readonly work: number,
    readonly cost: number,
    readonly args: readonly string[],
    /** The policy's short id in this limiter's denial cache; undefined without a cache. */
    readonly localId: number | undefined,
  ) {}

  /**
   * The denial cache's key for this scope and policy ('' without a cache), built when first
   * needed: a take answered from a grant, or while nothing is cached, needs none.
   */
  get localKey(): string {
    if (this.#localKey !== undefined) return this.#localKey;
    const { tenant, route, user } = this.parts;
    // The cache is keyed by the scope's text, so a cached denial costs no hashing (the
    // lengths keep it unambiguous); long ids are keyed by their hash instead, to bound each
    // entry's size.
    this.#localKey =
      this.localId === undefined
        ? ''
        : tenant.length + (route?.length ?? 0) + (user?.length ?? 0) > LOCAL_KEY_MAX_TEXT
          ? `#${this.key}`
          : `${this.localId}:${tenant.length}:${tenant}${
              route === undefined ? '-' : `${route.length}:${route}`
            }${user ?? ''}`;
    return this.#localKey;
  }

  /** The Redis key (hashed once, when first needed: not for an answer from the cache). */
  get key(): string {
    this.#key ??= scopeKey(
      this.namespace,
      this.policy.id,
      this.parts.tenant,
      this.parts.route,
      this.parts.user,
    );
    return this.#key;
  }

  /** The Redis key, given the tenant's hash tag (the items of a takeAll share one). */
  keyWithTag(tag: string): string {
    this.#key ??= scopeKey(
      this.namespace,
      this.policy.id,
      this.parts.tenant,
      this.parts.route,
      this.parts.user,
      tag,
    );
    return this.#key;
  }
}

/** What a limiter keeps per policy: its batch id, its short id in cache keys, its work. */
interface Compiled {
  readonly batchId: number;
  readonly localId: number;
  /** Redis work of one item, estimated µs (see `BatchRequest.work`). */
  readonly work: number;
}

/** Turns a limiter's input into targets (one per limiter: it numbers the policies it meets). */
export class TargetMaker {
  readonly #namespace: string;
  /** Whether targets need a denial-cache key. */
  readonly #cached: boolean;
  readonly #compiled = new WeakMap<Policy, Compiled>();
  #policies = 0;

  constructor(namespace: string, cached: boolean) {
    this.#namespace = namespace;
    this.#cached = cached;
  }

  /**
   * Validates one scope, policy and cost (reading each field once) into a target. A key of
   * `scope` or of `options` not in its shape (`usr`, `Cost`) is an error, never ignored.
   *
   * @param optionKeys the keys `options` may have: a take's, or a takeAll item's
   */
  one(
    scope: Scope,
    policy: Policy,
    options: TakeOptions | undefined,
    scopeField: string,
    policyField: string,
    optionsField: string,
    optionKeys: readonly string[] = TAKE_OPTION_KEYS,
  ): Target {
    if (!isPolicy(policy)) {
      throw new InvalidInputError(
        policyField,
        'a policy from a builder such as fixedWindow()',
        policy,
      );
    }
    if (options !== undefined) {
      if (typeof options !== 'object' || options === null) {
        throw new InvalidInputError(optionsField, 'an object such as { cost }', options);
      }
      onlyKnownKeys(options, optionKeys, optionsField);
    }
    const cost = takeCost(options, optionsField);
    if (cost !== 1 && isConcurrency(policy)) {
      throw new InvalidInputError(`${optionsField}.cost`, '1 (a lease holds one slot)', cost);
    }
    const compiled = this.#compile(policy, policyField);
    const parts = scopeParts(scope, scopeField);
    const args = policy.args(cost);
    return new Target(
      this.#namespace,
      parts,
      policy,
      compiled.batchId,
      compiled.work,
      cost,
      args,
      this.#cached ? compiled.localId : undefined,
    );
  }

  /**
   * Validates the target of a lease call (`leases.ts`): `policy` must be a concurrency
   * policy; its ARGV name the action and the lease `id` (checked by the caller).
   */
  lease(scope: Scope, policy: Policy, action: LeaseAction, id: string): Target {
    if (!isPolicy(policy) || !isConcurrency(policy)) {
      throw new InvalidInputError('policy', 'a policy from concurrency()', policy);
    }
    const compiled = this.#compile(policy, 'policy');
    return new Target(
      this.#namespace,
      scopeParts(scope, 'scope'),
      policy,
      compiled.batchId,
      compiled.work,
      1,
      leaseArgs(policy, action, id),
      undefined,
    );
  }

  /**
   * Validates the items of a `takeAll`: 1 to {@link MAX_TAKE_ALL_ITEMS}, one tenant, no
   * scope and policy twice. Their keys share the tenant's hash tag, hashed once.
   */
  all(items: readonly TakeAllItem[]): Target[] {
    const expected = `an array of 1 to ${MAX_TAKE_ALL_ITEMS} { scope, policy, cost? }`;
    let count: unknown;
    try {
      count = Array.isArray(items) ? items.length : undefined;
    } catch {
      count = undefined; // a revoked Proxy
    }
    if (typeof count !== 'number' || count < 1 || count > MAX_TAKE_ALL_ITEMS) {
      throw new InvalidInputError('items', expected, items);
    }
    const targets: Target[] = [];
    const seen = new Map<string, number>();
    let tenant: string | undefined;
    let tag = '';
    // `count` was read once: a Proxy whose length changes cannot add items.
    for (let i = 0; i < count; i++) {
      const field = `items[${i}]`;
      const item = readProperty(items, String(i), 'items');
      const target = this.one(
        readProperty(item, 'scope', field) as Scope,
        readProperty(item, 'policy', field) as Policy,
        item as TakeOptions,
        `${field}.scope`,
        `${field}.policy`,
        field,
        ITEM_KEYS,
      );
      if (tenant === undefined) {
        tenant = target.parts.tenant;
        tag = tenantTag(tenant);
      } else if (target.parts.tenant !== tenant) {
        throw new InvalidInputError(
          `${field}.scope.tenant`,
          'the tenant of items[0] (one takeAll decides for one tenant)',
          target.parts.tenant,
        );
      }
      const key = target.keyWithTag(tag);
      const earlier = seen.get(key);
      if (earlier !== undefined) {
        throw new InvalidInputError(
          field,
          `a scope and policy not already in items[${earlier}]`,
          item,
        );
      }
      seen.set(key, i);
      targets.push(target);
    }
    return targets;
  }

  #compile(policy: Policy, field: string): Compiled {
    let compiled = this.#compiled.get(policy);
    if (compiled === undefined) {
      const id = batchId(policy.script);
      if (id === undefined)
        throw new InvalidInputError(field, 'a policy of a known algorithm', policy);
      // A block (see block.lua) adds a PTTL, and on a refusal a GET and a SET.
      const work = batchWork(id, policy.limit) + (policy.block === undefined ? 0 : BLOCK_WORK);
      compiled = { batchId: id, localId: this.#policies++, work };
      this.#compiled.set(policy, compiled);
    }
    return compiled;
  }
}

/** The `requestId` option: absent, or a string of 1–256 characters. */
export function readRequestId(
  options: TakeOptions | TakeAllOptions | undefined,
  field: string,
): string | undefined {
  if (options === undefined) return undefined;
  const id = readProperty(options, 'requestId', field);
  if (id === undefined) return undefined;
  if (typeof id !== 'string' || id.length === 0 || id.length > 256) {
    throw new InvalidInputError(`${field}.requestId`, 'a string of 1 to 256 characters', id);
  }
  return id;
}

/** The `requestId` of options that were refused for another field, when it is valid. */
export function requestIdIfValid(
  options: TakeOptions | TakeAllOptions | undefined,
): string | undefined {
  try {
    return readRequestId(options, 'options');
  } catch {
    return undefined;
  }
}

function takeCost(options: TakeOptions | undefined, field: string): number {
  if (options === undefined) return 1;
  const cost = readProperty(options, 'cost', field);
  return cost === undefined ? 1 : positiveSafeInteger(`${field}.cost`, cost);
}

/**
 * Checks the options of a `takeAll` (only `requestId`) and reads its request id.
 *
 * @throws {InvalidInputError} an unknown key or a bad `requestId`
 */
export function readTakeAllOptions(options: TakeAllOptions | undefined): string | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== 'object' || options === null) {
    throw new InvalidInputError('options', 'an object such as { requestId }', options);
  }
  onlyKnownKeys(options, TAKE_ALL_OPTION_KEYS, 'options');
  return readRequestId(options, 'options');
}

/** Reads each part of `scope` once and checks it; the values returned are the values checked. */
function scopeParts(scope: unknown, field: string): ScopeParts {
  const tenant = readProperty(scope, 'tenant', field);
  onlyKnownKeys(scope as object, SCOPE_KEYS, field);
  checkPart(field, 'tenant', tenant);
  const route = readProperty(scope, 'route', field);
  if (route !== undefined) checkPart(field, 'route', route);
  const user = readProperty(scope, 'user', field);
  if (user !== undefined) checkPart(field, 'user', user);
  return { tenant, route, user };
}

/** Checks one part of a scope; the field's name is built only for the error. */
function checkPart(field: string, part: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_SCOPE_PART_LENGTH) {
    throw new InvalidInputError(
      `${field}.${part}`,
      `a non-empty string of at most ${MAX_SCOPE_PART_LENGTH} characters`,
      value,
    );
  }
}
