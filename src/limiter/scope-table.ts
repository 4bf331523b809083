/**
 * Values kept per scope under one policy, found without building a key string. A target's
 * `localKey` is a concatenation: looking it up in a `Map` first flattens and hashes it, about
 * 250 ns on the reference machine, a quarter of a take answered in process (bench/PROFILE.md,
 * "Prefetch"). Here each level is keyed by a part as the caller gave it (a flat string, hashed
 * once per string), so a lookup is four `Map.get`s of a few nanoseconds each.
 *
 * Policies are keyed by identity, as the denial cache's short ids are (`TargetMaker`): two
 * policy objects built alike are two entries. Empty levels are dropped, so the table holds
 * no policy or part once its last value is deleted.
 */
import type { Policy } from '../types.js';
import type { ScopeParts } from './targets.js';

/** A scope part that is absent (`route`, `user`): parts are never empty strings. */
const ABSENT = '';

type Users<V> = Map<string, V>;
type Routes<V> = Map<string, Users<V>>;
type Tenants<V> = Map<string, Routes<V>>;

export class ScopeTable<V> {
  readonly #policies = new Map<Policy, Tenants<V>>();
  #size = 0;

  /** The number of values held. */
  get size(): number {
    return this.#size;
  }

  get(policy: Policy, parts: ScopeParts): V | undefined {
    return this.#policies
      .get(policy)
      ?.get(parts.tenant)
      ?.get(parts.route ?? ABSENT)
      ?.get(parts.user ?? ABSENT);
  }

  set(policy: Policy, parts: ScopeParts, value: V): void {
    const tenants = level(this.#policies, policy);
    const routes = level(tenants, parts.tenant);
    const users = level(routes, parts.route ?? ABSENT);
    const user = parts.user ?? ABSENT;
    if (!users.has(user)) this.#size++;
    users.set(user, value);
  }

  /** Deletes the value of `parts` under `policy`; true when there was one. */
  delete(policy: Policy, parts: ScopeParts): boolean {
    const tenants = this.#policies.get(policy);
    const routes = tenants?.get(parts.tenant);
    const route = parts.route ?? ABSENT;
    const users = routes?.get(route);
    if (tenants === undefined || routes === undefined || users === undefined) return false;
    if (!users.delete(parts.user ?? ABSENT)) return false;
    this.#size--;
    if (users.size === 0) routes.delete(route);
    if (routes.size === 0) tenants.delete(parts.tenant);
    if (tenants.size === 0) this.#policies.delete(policy);
    return true;
  }

  /** Every value held, in no particular order. */
  *values(): IterableIterator<V> {
    for (const tenants of this.#policies.values()) {
      for (const routes of tenants.values()) {
        for (const users of routes.values()) yield* users.values();
      }
    }
  }
}

/** The map under `key` in `parent`, added when missing. */
function level<K, M extends Map<unknown, unknown>>(parent: Map<K, M>, key: K): M {
  let child = parent.get(key);
  if (child === undefined) {
    child = new Map() as M;
    parent.set(key, child);
  }
  return child;
}
