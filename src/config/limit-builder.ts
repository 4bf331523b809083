/**
 * Limit specs of a policy document into policies and limits: an inline policy into a
 * policy from its builder, a name into the named policy, `{ policy, per }` into a scoped
 * limit, a list into stacked limits checked as the guard checks them. Every problem is
 * added at its path; the named policies seen so far are kept, so that one name is one
 * policy across the file.
 */
import { concurrency } from '../algorithms/concurrency.js';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { gcra } from '../algorithms/gcra.js';
import { slidingWindowCounter } from '../algorithms/sliding-window-counter.js';
import { slidingWindowLog } from '../algorithms/sliding-window-log.js';
import { tokenBucket } from '../algorithms/token-bucket.js';
import { MAX_TAKE_ALL_ITEMS } from '../bounds.js';
import { InvalidInputError } from '../errors.js';
import {
  type Limit,
  type LimitScope,
  type Limits,
  limitNames,
  type ResolvedLimit,
  resolveLimits,
} from '../http/limits.js';
import type { Policy } from '../types.js';
import { type Path, valueAt } from './paths.js';
import { isObject, type Problems } from './problems.js';
import { type Definition, definition, scopedLimit } from './schema.js';

/** What a limit spec in the file becomes before the guard's own checks. */
export interface Built {
  readonly limits: ResolvedLimit[];
  /** False when a problem was found in it (then `limits` may be partial). */
  readonly ok: boolean;
}

export class LimitBuilder {
  /** The `policies` map. */
  readonly named = new Map<string, Policy>();
  /** Every key of the `policies` map, valid or not (a reference to a bad one is no new problem). */
  readonly declared = new Set<string>();
  /** Every named policy (map and inline), by name, with where it was defined. */
  readonly names = new Map<string, { policy: Policy; at: string }>();

  constructor(readonly problems: Problems) {}

  /** Builds an inline definition at `path`; `mapName` given for entries of the map. */
  policy(input: unknown, path: Path, mapName?: string): Policy | undefined {
    if (mapName !== undefined && isObject(input) && Object.hasOwn(input, 'name')) {
      this.problems.add(
        [...path, 'name'],
        'absent (the key in "policies" names the policy)',
        input.name,
      );
      const { name: _, ...rest } = input;
      this.problems.parse(definition, rest, path); // its other problems too
      return undefined;
    }
    const parsed = this.problems.parse(definition, input, path);
    if (parsed === undefined) return undefined;
    const policy = this.build(mapName === undefined ? parsed : { ...parsed, name: mapName }, path);
    if (policy === undefined) return undefined;
    return policy.named ? this.unique(policy, path, mapName) : policy;
  }

  /** A named policy, unless another policy already has its name. */
  private unique(policy: Policy, path: Path, mapName: string | undefined): Policy | undefined {
    const seen = this.names.get(policy.name);
    if (seen !== undefined && seen.policy.id !== policy.id) {
      this.problems.add(
        mapName === undefined ? [...path, 'name'] : path,
        `a name not given to another policy ("${policy.name}" is defined at ${seen.at}; refer to it from "policies" by name, or name this one differently)`,
        policy.name,
      );
      return undefined;
    }
    if (seen === undefined) this.names.set(policy.name, { policy, at: this.problems.where(path) });
    return policy;
  }

  /** Runs the builder; its errors (`policy.limit`) become problems at `path.limit`. */
  private build(d: Definition, path: Path): Policy | undefined {
    try {
      return buildPolicy(d);
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      const rest = error.field.replace(/^policy\.?/, '');
      const at = rest === '' ? [] : rest.split('.');
      this.problems.add([...path, ...at], error.expected, valueAt(d, at));
      return undefined;
    }
  }

  /** One limit: a name, an inline policy, or `{ policy, per }`. */
  limit(input: unknown, path: Path): ResolvedLimit | undefined {
    if (typeof input === 'string') return this.reference(input, path);
    if (isObject(input) && Object.hasOwn(input, 'algorithm')) {
      const policy = this.policy(input, path);
      return policy === undefined ? undefined : { policy, per: 'route' };
    }
    if (isObject(input) && Object.hasOwn(input, 'policy')) return this.scoped(input, path);
    this.problems.add(
      path,
      'a policy name, an inline policy { algorithm, … }, or { policy, per }',
      input,
    );
    return undefined;
  }

  /** A policy of the `policies` map, by name. */
  private reference(name: string, path: Path): ResolvedLimit | undefined {
    const policy = this.named.get(name);
    if (policy !== undefined) return { policy, per: 'route' };
    // A key of the map whose policy is invalid: that problem is reported already.
    if (this.declared.has(name)) return undefined;
    const known = [...this.declared];
    this.problems.add(
      path,
      known.length === 0
        ? `a policy defined in "policies" (there is none; "${name}" is not defined)`
        : `the name of a policy in "policies" (${known.map((n) => `"${n}"`).join(', ')}), not "${name}"`,
      name,
    );
    return undefined;
  }

  /** `{ policy, per }`: a name or an inline policy, counted on the scope `per`. */
  private scoped(input: Record<string, unknown>, path: Path): ResolvedLimit | undefined {
    const parsed = this.problems.parse(scopedLimit, input, path);
    if (parsed === undefined) return undefined;
    if (
      Array.isArray(parsed.policy) ||
      (isObject(parsed.policy) && Object.hasOwn(parsed.policy, 'policy'))
    ) {
      this.problems.add(
        [...path, 'policy'],
        'a policy name or an inline policy { algorithm, … }',
        parsed.policy,
      );
      return undefined;
    }
    const inner = this.limit(parsed.policy, [...path, 'policy']);
    return inner === undefined ? undefined : { policy: inner.policy, per: parsed.per ?? 'route' };
  }

  /**
   * One limit or a list of 1–16, checked as the guard checks them; `per` (a route's own
   * `per`) sets the scope of a single limit.
   */
  limits(input: unknown, path: Path, route: string, per?: LimitScope): Built {
    if (Array.isArray(input) && !this.listAllowed(input, path, per)) {
      return { limits: [], ok: false };
    }
    const list = Array.isArray(input) ? input : [input];
    const limits: ResolvedLimit[] = [];
    let ok = true;
    list.forEach((item, i) => {
      const limit = this.limit(item, Array.isArray(input) ? [...path, i] : path);
      if (limit === undefined) ok = false;
      else limits.push(per === undefined ? limit : { policy: limit.policy, per });
    });
    if (!ok) return { limits, ok };
    return { limits, ok: this.guardAccepts(limits, path, route) };
  }

  /** A list of limits has 1–16 items, and no route-level `per`. */
  private listAllowed(input: readonly unknown[], path: Path, per: LimitScope | undefined): boolean {
    if (per !== undefined) {
      this.problems.add(
        [...path.slice(0, -1), 'per'],
        'absent when policy is a list (give each item its own per)',
        per,
      );
      return false;
    }
    if (input.length < 1 || input.length > MAX_TAKE_ALL_ITEMS) {
      this.problems.add(path, `a list of 1–${MAX_TAKE_ALL_ITEMS} limits`, input);
      return false;
    }
    return true;
  }

  /** The guard's own checks of a route's limits, named by their place in the file. */
  private guardAccepts(limits: readonly ResolvedLimit[], path: Path, route: string): boolean {
    const field = this.problems.where(path);
    try {
      const resolved = resolveLimits(asLimits(limits), field);
      limitNames(resolved, route, field);
      return true;
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      this.problems.list.push({ field: error.field, expected: error.expected, value: undefined });
      return false;
    }
  }
}

/** Limits as the guard takes them: a policy alone for the route's scope. */
export function asLimits(limits: readonly ResolvedLimit[]): Limits {
  const out = limits.map((l) => (l.per === 'route' ? l.policy : Object.freeze({ ...l })));
  return Object.freeze(out.length === 1 ? (out[0] as Limit) : out);
}

/** The policy of a valid inline definition, from its algorithm's builder. */
function buildPolicy(r: Definition): Policy {
  const identity =
    r.algorithm === 'concurrency'
      ? { name: r.name, version: r.version }
      : { name: r.name, version: r.version, blockMs: r.blockMs, escalate: r.escalate };
  switch (r.algorithm) {
    case 'fixed-window':
      return fixedWindow({ limit: r.limit, windowMs: r.windowMs, ...identity });
    case 'sliding-window-log':
      return slidingWindowLog({ limit: r.limit, windowMs: r.windowMs, ...identity });
    case 'sliding-window-counter':
      return slidingWindowCounter({ limit: r.limit, windowMs: r.windowMs, ...identity });
    case 'token-bucket':
      return tokenBucket({
        capacity: r.capacity,
        refillTokens: r.refillTokens,
        refillIntervalMs: r.refillIntervalMs,
        ...identity,
      });
    case 'gcra':
      return gcra({ limit: r.limit, periodMs: r.periodMs, burst: r.burst, ...identity });
    case 'concurrency':
      return concurrency({ limit: r.limit, leaseMs: r.leaseMs, name: r.name, version: r.version });
  }
}
