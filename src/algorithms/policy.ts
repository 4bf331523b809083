/**
 * What every policy has in common: how a builder makes a frozen, genuine policy (its name,
 * its id in Redis keys, its ARGV, its denial-cache rule) and the checks every builder shares.
 */
import { InvalidInputError } from '../errors.js';
import { digest } from '../key.js';
import type { BlockSpec, Decision, DenialHold, Policy } from '../types.js';
import { positiveSafeInteger, readProperty, rejectUnknownKeys } from '../validate.js';
import type { LuaScript } from './script.js';

/** What a builder gives {@link buildPolicy}. */
export interface PolicySpec {
  /** The `name` option (validated), or undefined to derive one from `summary`. */
  readonly name: string | undefined;
  /** The parameters in words, for a derived name, e.g. `"10-per-60000ms"`. */
  readonly summary: string;
  readonly horizonMs: number;
  readonly algorithm: string;
  readonly keyTag: string;
  readonly limit: number;
  readonly version: string;
  readonly maxCost: number;
  readonly quotaWindowMs: number;
  readonly script: LuaScript;
  /** The script's ARGV before the cost, in order. */
  readonly params: readonly number[];
  /**
   * True when `remaining: 0` means every take is denied until `resetMs` (the fixed
   * window: nothing un-spends quota inside a window).
   */
  readonly fullUntilReset?: boolean;
  /** ARGV a take sends after the cost, made per take (a concurrency lease's action and id). */
  readonly tail?: () => readonly string[];
  /** False when no denial is certain for any time (a concurrency policy): nothing is cached. */
  readonly cacheDenials?: false;
  /** The block options (validated by {@link policyIdentity}), if any. */
  readonly block?: BlockSpec;
}

/**
 * Makes a frozen, genuine policy: the ARGV of a take is `params` then the cost (the unit
 * cost's ARGV built once), and the denial-cache rule shared by every algorithm whose
 * admission is monotone in cost: a take of 1 denied with a finite `retryAfterMs` means
 * every take is denied for `retryAfterMs − 1` ms, since the same take succeeds only then.
 */
export function buildPolicy<E extends object>(spec: PolicySpec, extra: E): Policy & E {
  const params = spec.params.map((value) => String(value));
  const block = spec.block;
  const blockArgs =
    block === undefined
      ? []
      : ['b', block.blockMs, block.factor, block.maxMs, block.withinMs].map(String);
  const unitArgs = Object.freeze([...params, '1', ...blockArgs]);
  const { tail } = spec;
  const name =
    spec.name ??
    `${spec.algorithm}-${spec.summary}${spec.version === '1' ? '' : `-v${spec.version}`}`;
  const identity: unknown[] = [spec.algorithm, params, spec.version, name];
  if (blockArgs.length > 0) identity.push(blockArgs);
  const id = `${spec.keyTag}.${digest(identity, 16)}`;
  const denialHold = holdRule(spec.fullUntilReset === true);
  return definePolicy({
    name,
    named: spec.name !== undefined,
    id,
    // A block's key lives at most maxMs + withinMs (see block.lua).
    horizonMs:
      block === undefined ? spec.horizonMs : Math.max(spec.horizonMs, block.maxMs + block.withinMs),
    algorithm: spec.algorithm,
    keyTag: spec.keyTag,
    limit: spec.limit,
    version: spec.version,
    maxCost: spec.maxCost,
    quotaWindowMs: spec.quotaWindowMs,
    script: spec.script,
    ...extra,
    args:
      tail === undefined
        ? (cost: number) => (cost === 1 ? unitArgs : [...params, String(cost), ...blockArgs])
        : (cost: number) => [...params, String(cost), ...tail()],
    block,
    // Logs and JSON show the policy, not its Lua source.
    toJSON: () => ({
      name,
      algorithm: spec.algorithm,
      limit: spec.limit,
      version: spec.version,
      ...extra,
    }),
    denialHold:
      spec.cacheDenials === false
        ? () => undefined
        : block === undefined
          ? denialHold
          : (decision: Decision) =>
              // Blocked: every take is refused until the block ends. Nothing else is held: the
              // refusal that starts a block must reach Redis.
              decision.blocked === true && decision.resetMs > 0
                ? { ms: decision.resetMs, anyCost: true }
                : undefined,
  });
}

/** The denial-cache rule of an algorithm (see {@link buildPolicy}). */
function holdRule(fullUntilReset: boolean) {
  return (decision: Decision, cost: number): DenialHold | undefined => {
    if (fullUntilReset && decision.remaining === 0 && decision.resetMs > 0) {
      return { ms: decision.resetMs, anyCost: true };
    }
    if (
      !decision.allowed &&
      cost === 1 &&
      Number.isFinite(decision.retryAfterMs) &&
      decision.retryAfterMs > 1
    ) {
      return { ms: decision.retryAfterMs - 1, anyCost: false };
    }
    return undefined;
  };
}

const VERSION = /^[A-Za-z0-9._-]{1,64}$/;
const NAME = /^[A-Za-z0-9._:/-]{1,64}$/;

/** Validates a policy name (see `PolicyIdentityOptions.name`); undefined when absent. */
export function policyName(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string' && NAME.test(value)) return value;
  throw new InvalidInputError('policy.name', '1–64 characters of [A-Za-z0-9._:/-]', value);
}

/** Options every builder takes besides its parameters. */
export interface PolicyIdentityOptions {
  /**
   * The policy's name, shown in the `RateLimit-Policy` header, metrics and the CLI:
   * 1–64 characters of `[A-Za-z0-9._:/-]`. Default: derived from the algorithm and its
   * parameters. Part of the policy's identity: renaming a policy starts a fresh quota.
   */
  readonly name?: string;
  /**
   * Policy version, part of the policy's identity: bump it to start every scope
   * afresh without changing a parameter. A string of letters, digits, `.`, `_` or `-` (at
   * most 64), or a non-negative safe integer. Default `1`.
   */
  readonly version?: string | number;
  /**
   * Blocks: once a take of a scope is refused, the scope stays refused for `blockMs` from
   * that refusal, on every replica (kept in Redis beside the scope's key, answered from the
   * denial cache), whatever the algorithm would admit meanwhile; decisions say `blocked:
   * true`. An integer from 1 to 315,360,000,000. Default: no block. Part of the policy's
   * identity, and of its horizon.
   */
  readonly blockMs?: number;
  /**
   * Escalating blocks (with `blockMs`): a refusal within `withinMs` of the end of the last
   * block blocks for `factor` times as long as that one, at most `maxMs`; after `withinMs`
   * without a block, the next is `blockMs` again. `factor`: an integer from 2 to 1,000;
   * `maxMs` from `blockMs` to 315,360,000,000; `withinMs` from 1 to 315,360,000,000.
   */
  readonly escalate?: {
    readonly factor: number;
    readonly maxMs: number;
    readonly withinMs: number;
  };
}

/** Reads the `name`, `version`, `blockMs` and `escalate` options of a builder. */
export function policyIdentity(options: object): {
  name: string | undefined;
  version: string;
  block: BlockSpec | undefined;
} {
  return {
    name: policyName(readProperty(options, 'name', 'policy')),
    version: policyVersion(readProperty(options, 'version', 'policy')),
    block: policyBlock(options),
  };
}

/** Validates `blockMs` and `escalate` (see {@link PolicyIdentityOptions}). */
function policyBlock(options: object): BlockSpec | undefined {
  const blockMs = readProperty(options, 'blockMs', 'policy');
  const escalate = readProperty(options, 'escalate', 'policy');
  if (blockMs === undefined) {
    if (escalate !== undefined) {
      throw new InvalidInputError(
        'policy.blockMs',
        'a positive safe integer number of ms (required when escalate is given)',
        blockMs,
      );
    }
    return undefined;
  }
  const ms = positiveSafeInteger('policy.blockMs', blockMs, MAX_WINDOW_MS);
  if (escalate === undefined) return { blockMs: ms, factor: 1, maxMs: ms, withinMs: 0 };
  if (typeof escalate !== 'object' || escalate === null) {
    throw new InvalidInputError(
      'policy.escalate',
      'an object { factor, maxMs, withinMs }',
      escalate,
    );
  }
  rejectUnknownKeys(escalate, ['factor', 'maxMs', 'withinMs'], 'policy.escalate');
  const factor = readProperty(escalate, 'factor', 'policy.escalate');
  if (typeof factor !== 'number' || !Number.isInteger(factor) || factor < 2 || factor > 1000)
    throw new InvalidInputError('policy.escalate.factor', 'an integer from 2 to 1000', factor);
  const maxMs = positiveSafeInteger(
    'policy.escalate.maxMs',
    readProperty(escalate, 'maxMs', 'policy.escalate'),
    MAX_WINDOW_MS,
  );
  if (maxMs < ms)
    throw new InvalidInputError('policy.escalate.maxMs', `at least blockMs (${ms})`, maxMs);
  const withinMs = positiveSafeInteger(
    'policy.escalate.withinMs',
    readProperty(escalate, 'withinMs', 'policy.escalate'),
    MAX_WINDOW_MS,
  );
  return { blockMs: ms, factor, maxMs, withinMs };
}

const policies = new WeakSet<object>();

/** Freezes a policy built by a builder of this package and marks it as genuine. */
export function definePolicy<P extends Policy>(policy: P): P {
  Object.freeze(policy);
  policies.add(policy);
  return policy;
}

/** True for a policy made by one of this package's builders (not a look-alike object). */
export function isPolicy(value: unknown): value is Policy {
  return typeof value === 'object' && value !== null && policies.has(value);
}

/**
 * Longest window accepted, in ms (10 years): keeps every TTL and time sum far inside the
 * integers that Lua and JavaScript numbers represent exactly.
 */
export const MAX_WINDOW_MS = 315_360_000_000;

/**
 * Largest limit, capacity or burst accepted: 10^15 − 1 (999,999,999,999,999). Two bounds
 * meet here: Redis replies carry integers that the client decodes into JavaScript numbers,
 * exact far below 2^53; and the limit is advertised in `RateLimit-Policy` as a Structured
 * Field integer, which has at most 15 digits (RFC 8941 §3.3.1) — so no header ever has to
 * cap or misstate a quota.
 */
export const MAX_LIMIT = 999_999_999_999_999;

/**
 * Throws unless `options` is an object with no keys but `known` and the identity options
 * (`name`, `version`): the builders' first check.
 */
export function requireObject(options: unknown, shape: string, known: readonly string[]): void {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidInputError('policy', `an object ${shape}`, options);
  }
  rejectUnknownKeys(options, [...known, 'name', 'version', 'blockMs', 'escalate'], 'policy');
}

/**
 * Reads `options[name]` once and checks it is an integer from 1 to `max`; errors name
 * `policy.<name>`. With `fallback`, an absent field takes that value.
 */
export function policyInteger(
  options: object,
  name: string,
  max: number,
  fallback?: number,
): number {
  const value = readProperty(options, name, 'policy');
  if (value === undefined && fallback !== undefined) return fallback;
  return positiveSafeInteger(`policy.${name}`, value, max);
}

/** Throws unless `a × b` stays a safe integer (exact arithmetic in the scripts). */
export function requireProduct(field: string, a: number, b: number, what: string): void {
  if (!Number.isSafeInteger(a * b)) {
    throw new InvalidInputError(field, `small enough that ${what} ≤ 2^53 − 1`, a);
  }
}

/** Validates a policy version (see `FixedWindowOptions.version`); returns its key form. */
export function policyVersion(value: unknown): string {
  if (value === undefined) return '1';
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return String(value);
  if (typeof value === 'string' && VERSION.test(value)) return value;
  throw new InvalidInputError(
    'policy.version',
    'a non-negative safe integer or 1–64 characters of [A-Za-z0-9._-]',
    value,
  );
}
