/**
 * One `ShouldRateLimit`: plan the descriptors, decide them on Redis, answer.
 *
 * sluice's counting (default): the enforced descriptors (neither `shadow_mode` nor
 * `quota_mode`, hits above 0) are decided together, all or nothing, in one atomic
 * `takeAll` — a refused request spends no quota that did not refuse it. Their scope's tenant
 * is the domain, so that they share a Redis Cluster hash slot. Check-only descriptors
 * (hits 0) are peeked (a hit of 1 would be admitted, consuming nothing); shadow- and
 * quota-mode descriptors are taken each on its own, so that they never refuse the others.
 *
 * `--compat reference`: every matched descriptor is incremented by its hits, in
 * clock-aligned windows, in one atomic script call (`reference-count.lua`).
 */
import { MAX_SCOPE_PART_LENGTH, MAX_TAKE_ALL_ITEMS } from '../bounds.js';
import type { RateLimiter } from '../limiter/rate-limiter.js';
import type { ScriptStore } from '../stores/store.js';
import type { Decision, Scope, TakeAllItem } from '../types.js';
import { type Denied, type Limited, type Planned, plan } from './plan.js';
import type { Policies } from './policies.js';
import { countReference, referenceKey } from './reference-count.js';
import { BadRequestError, type ServeRequest } from './request.js';
import {
  type Code,
  type DescriptorStatus,
  durationOf,
  type ServeResponse,
  type StructValue,
  UNLIMITED_REMAINING,
} from './response.js';
import type { Rule, RuleSet } from './rules/tree.js';
import type { AnswerSettings } from './settings.js';

/** No valid configuration is loaded: answered as `UNAVAILABLE`. */
export class NoConfigError extends Error {
  constructor() {
    super('no valid rate limit configuration is loaded');
    this.name = 'NoConfigError';
  }
}

/** The `domain` label of every domain no file configures (bounded metrics). */
export const UNKNOWN_DOMAIN = '(unknown)';
/** The `key` label of a descriptor decided by the request's own limit override. */
export const OVERRIDE_KEY = '(override)';

/** How one limited descriptor came out. */
interface Outcome {
  readonly over: boolean;
  readonly remaining: number;
  readonly resetMs: number;
}

/** What one descriptor's answer was, for metrics. */
export type DescriptorOutcome =
  | 'ok'
  | 'over_limit'
  | 'shadow_over_limit'
  | 'quota_over_limit'
  | 'unlimited'
  | 'no_rule'
  | 'replaced';

export interface DeciderOptions {
  readonly limiter: RateLimiter;
  readonly store: ScriptStore;
  readonly settings: AnswerSettings;
  readonly policies: Policies;
  readonly rules: () => RuleSet | undefined;
  /**
   * Called once per descriptor with its metric labels: the domain (a configured one, else
   * {@link UNKNOWN_DOMAIN}), the rule's key (or {@link OVERRIDE_KEY}), the outcome, and,
   * under the rule's `detailed_metric`, the runtime key (`domain.key_value…`).
   */
  readonly onDescriptor?: (
    domain: string,
    key: string,
    outcome: DescriptorOutcome,
    detail?: string,
  ) => void;
}

export class Decider {
  readonly #o: DeciderOptions;
  /** Each rule's `current_limit` (answers share it; a new configuration has new rules). */
  readonly #limits = new WeakMap<Rule, NonNullable<DescriptorStatus['current_limit']>>();

  constructor(options: DeciderOptions) {
    this.#o = options;
  }

  /**
   * @throws {NoConfigError} no configuration loaded.
   * @throws {BadRequestError} more limited descriptors than one atomic call takes (16).
   * @throws the limiter's errors (`TimeoutError`, `UnavailableError`, `OverloadError`,
   *   `StoreError`, `InvalidInputError`).
   */
  async decide(request: ServeRequest): Promise<ServeResponse> {
    const rules = this.#o.rules();
    if (rules === undefined) throw new NoConfigError();
    const planned = plan(request, rules, this.#o.policies);
    let limited = 0;
    let denied = false;
    let refused = false;
    for (const p of planned) {
      if (p.kind === 'limited') limited++;
      else if (p.kind === 'denied') {
        denied = true;
        if (deniesAll(p)) refused = true;
      }
    }
    if (limited > MAX_TAKE_ALL_ITEMS) {
      // One atomic call each way, and a script's time is bounded by its keys.
      throw new BadRequestError(
        `at most ${MAX_TAKE_ALL_ITEMS} limited descriptors per request are decided in one atomic call; received ${limited}`,
      );
    }
    for (let i = 0; i < planned.length; i++) checkKeyLength(planned[i] as Planned, i);
    const outcomes =
      this.#o.settings.compat === 'reference'
        ? await this.#reference(request.domain, planned)
        : await this.#sluice(request.domain, planned, refused);
    if (denied) {
      planned.forEach((p, i) => {
        // Over before any hit, as the reference (its reset: the clock-aligned unit's end).
        if (p.kind === 'denied') {
          outcomes[i] = { over: true, remaining: 0, resetMs: p.unitMs - (Date.now() % p.unitMs) };
        }
      });
    }
    const label = rules.hasDomain(request.domain) ? request.domain : UNKNOWN_DOMAIN;
    return this.#answer(label, planned, outcomes);
  }

  /**
   * sluice's counting; the outcomes by descriptor index. `refused`: a deny-all rule refuses
   * the request already, so the enforced descriptors are only checked (nothing spent).
   */
  async #sluice(
    domain: string,
    planned: readonly Planned[],
    refused: boolean,
  ): Promise<(Outcome | undefined)[]> {
    const limiter = this.#o.limiter;
    const outcomes: (Outcome | undefined)[] = new Array(planned.length).fill(undefined);
    const items: TakeAllItem[] = [];
    /** Descriptor index → item index (the enforced ones), -1 for the others. */
    let itemOf: number[] | undefined;
    let pending: Promise<void>[] | undefined;
    for (let i = 0; i < planned.length; i++) {
      const p = planned[i] as Planned;
      if (p.kind !== 'limited') continue;
      // Structure-safe: ["a_b.c"] and ["a_b", "c"] are two scopes.
      const scope: Scope = { tenant: domain, route: JSON.stringify(p.counted) };
      if (p.hits === 0 || (refused && !p.shadow && !p.quota)) {
        pending ??= [];
        pending.push(
          limiter.peek(scope, p.policy).then((d) => {
            outcomes[i] = fromDecision(d, !d.allowed, p.unitMs);
          }),
        );
      } else if (p.shadow || p.quota) {
        pending ??= [];
        pending.push(
          limiter.take(scope, p.policy, { cost: p.hits }).then((d) => {
            outcomes[i] = fromDecision(d, !d.allowed, p.unitMs);
          }),
        );
      } else {
        itemOf ??= new Array(planned.length).fill(-1);
        // The same counter twice in one request: one item, the hits added up (at most 16
        // items: a scan, no map).
        let at = -1;
        for (let k = 0; k < items.length; k++) {
          const item = items[k] as TakeAllItem;
          if (item.policy.id === p.policy.id && item.scope.route === scope.route) {
            at = k;
            break;
          }
        }
        if (at < 0) {
          itemOf[i] = items.length;
          items.push({ scope, policy: p.policy, cost: p.hits });
        } else {
          itemOf[i] = at;
          const item = items[at] as TakeAllItem;
          items[at] = { ...item, cost: (item.cost ?? 1) + p.hits };
        }
      }
    }
    if (items.length > 0) {
      const of = itemOf as number[];
      const decided = limiter.takeAll(items).then(async (result) => {
        const after = result.allowed
          ? NONE_CHARGED
          : await chargeRefused(limiter, items, result.decisions);
        for (let i = 0; i < planned.length; i++) {
          const j = of[i] as number;
          if (j < 0) continue;
          const d = result.decisions[j] as Decision;
          const over = !result.allowed && d.retryAfterMs > 0;
          outcomes[i] = after[j] ?? fromDecision(d, over, (planned[i] as Limited).unitMs);
        }
      });
      if (pending === undefined) {
        await decided;
        return outcomes;
      }
      pending.push(decided);
    }
    if (pending !== undefined) await Promise.all(pending);
    return outcomes;
  }

  /** The reference's counting, one script call. */
  async #reference(domain: string, planned: readonly Planned[]): Promise<(Outcome | undefined)[]> {
    const limited = planned
      .map((p, i) => ({ p, i }))
      .filter((x): x is { p: Limited; i: number } => x.p.kind === 'limited');
    const outcomes: (Outcome | undefined)[] = planned.map(() => undefined);
    if (limited.length === 0) return outcomes;
    const prefix = this.#o.settings.keyPrefix;
    const counts = await countReference(
      this.#o.store,
      limited.map(({ p }) => ({
        key: referenceKey(prefix, domain, p.counted, p.unitMs),
        hits: p.hits,
        limit: p.requestsPerUnit,
        unitMs: p.unitMs,
      })),
      this.#o.settings.stopIncrementWhenOver,
    );
    limited.forEach(({ p, i }, k) => {
      const c = counts[k] as (typeof counts)[number];
      outcomes[i] = {
        over: c.over,
        remaining: Math.max(0, p.requestsPerUnit - c.count),
        resetMs: c.resetMs,
      };
    });
    return outcomes;
  }

  #answer(
    domain: string,
    planned: readonly Planned[],
    outcomes: readonly (Outcome | undefined)[],
  ): ServeResponse {
    const settings = this.#o.settings;
    const report = this.#o.onDescriptor;
    let over = false;
    let overrideOver = false;
    let violations: StructValue[] | undefined;
    let quotaRules = false;
    let tightest: DescriptorStatus | undefined;
    let tightestResetMs = 0;
    const statuses: DescriptorStatus[] = new Array(planned.length);
    for (let i = 0; i < planned.length; i++) {
      const p = planned[i] as Planned;
      if (p.kind === 'none') {
        report?.(domain, '', 'no_rule');
        statuses[i] = NO_RULE;
        continue;
      }
      if (p.kind === 'unlimited' || p.kind === 'replaced') {
        report?.(domain, p.rule.fullKey, p.kind);
        statuses[i] = p.kind === 'unlimited' ? UNLIMITED : REPLACED;
        continue;
      }
      const o = outcomes[i] as Outcome;
      if (p.quota) quotaRules = true;
      let code: Code = 'OK';
      let outcome: DescriptorOutcome = 'ok';
      if (o.over && p.shadow) outcome = 'shadow_over_limit';
      else if (o.over && p.quota) {
        outcome = 'quota_over_limit';
        violations ??= [];
        violations.push({ numberValue: i });
      } else if (o.over) {
        code = 'OVER_LIMIT';
        outcome = 'over_limit';
        over = true;
        if (p.rule === undefined) overrideOver = true;
      }
      if (p.rule === undefined) report?.(domain, OVERRIDE_KEY, outcome);
      else if (!p.rule.detailedMetric) report?.(domain, p.rule.fullKey, outcome);
      else report?.(domain, p.rule.fullKey, outcome, `${domain}.${p.counted.join('.')}`);
      const status: DescriptorStatus = {
        code,
        current_limit: this.#currentLimit(p),
        limit_remaining: Math.min(o.remaining, UNLIMITED_REMAINING),
        duration_until_reset: durationOf(o.resetMs),
      };
      if (tightest === undefined || status.limit_remaining < tightest.limit_remaining) {
        tightest = status;
        tightestResetMs = o.resetMs;
      }
      statuses[i] = status;
    }
    const overall: Code = (settings.shadowMode ? overrideOver : over) ? 'OVER_LIMIT' : 'OK';
    let headers: readonly { key: string; value: string }[] = NO_HEADERS;
    if (settings.headers !== undefined && tightest !== undefined) {
      const limit = tightest.current_limit;
      headers = [
        { key: settings.headers.limit, value: String(limit?.requests_per_unit ?? 0) },
        { key: settings.headers.remaining, value: String(tightest.limit_remaining) },
        { key: settings.headers.reset, value: String(Math.ceil(tightestResetMs / 1000)) },
      ];
    }
    const response: ServeResponse = {
      overall_code: overall,
      statuses,
      response_headers_to_add: headers,
    };
    if (!quotaRules) return response;
    return {
      ...response,
      dynamic_metadata: {
        fields: {
          quotaModeEnabled: { boolValue: true },
          quotaModeViolations: { listValue: { values: violations ?? [] } },
        },
      },
    };
  }

  /** A limited descriptor's `current_limit`: one object per rule, built once (answers share it). */
  #currentLimit(p: Limited | Denied): NonNullable<DescriptorStatus['current_limit']> {
    const rule = p.rule;
    let limit = rule === undefined ? undefined : this.#limits.get(rule);
    if (limit === undefined) {
      limit = Object.freeze({ requests_per_unit: p.requestsPerUnit, unit: p.unit, name: p.name });
      if (rule !== undefined) this.#limits.set(rule, limit);
    }
    return limit;
  }
}

/** The statuses that depend on nothing but their kind (answers share them). */
const NO_RULE: DescriptorStatus = Object.freeze({ code: 'OK', limit_remaining: 0 });
const UNLIMITED: DescriptorStatus = Object.freeze({
  code: 'OK',
  limit_remaining: UNLIMITED_REMAINING,
});
const REPLACED: DescriptorStatus = NO_RULE;
const NO_HEADERS: readonly { key: string; value: string }[] = Object.freeze([]);

/**
 * A limited descriptor's entries, as one key, fit sluice's scope bound (65,536 characters of
 * their JSON): else a `BadRequestError` naming `descriptors[i]`, nothing sent.
 */
function checkKeyLength(p: Planned, i: number): void {
  if (p.kind !== 'limited') return;
  let chars = 0;
  for (const part of p.counted) chars += part.length + 3;
  // JSON escapes a character into at most 6: only a long key needs the exact count.
  if (chars * 6 <= MAX_SCOPE_PART_LENGTH) return;
  const length = JSON.stringify(p.counted).length;
  if (length > MAX_SCOPE_PART_LENGTH) {
    throw new BadRequestError(
      `descriptors[${i}]: its entries are ${length} characters as a key (JSON of its key_value parts); at most ${MAX_SCOPE_PART_LENGTH}`,
    );
  }
}

/** An enforced deny-all descriptor (neither shadow nor quota mode): the request is refused. */
function deniesAll(p: Planned): boolean {
  return p.kind === 'denied' && !p.shadow && !p.quota;
}

/**
 * A limited descriptor's outcome from its decision. A scope with no state yet (or none left:
 * a clean scope, whose decision's `resetMs` is 0) reports the window a hit now would start,
 * its limit's unit (`unitMs`), as the first hit of a fixed window does — not 0, which would
 * tell Envoy's clients that the quota resets at once.
 */
/** No item charged (an admitted takeAll). */
const NONE_CHARGED: readonly (Outcome | undefined)[] = Object.freeze([]);

function fromDecision(d: Decision, over: boolean, unitMs: number): Outcome {
  return { over, remaining: d.remaining, resetMs: d.resetMs > 0 ? d.resetMs : unitMs };
}

/**
 * Counts, as the reference does, the descriptors that refused a request, and only those
 * (a refused request spends no quota that did not refuse it): so Envoy's check-then-debit
 * flow (descriptor `hits_addend: {value: 0}`, then the real hits when the stream ends) stays
 * bounded — a debit that goes over still counts, and the next check sees the scope over.
 * Every refused weighted request is charged so (the service cannot tell a debit from a
 * weighted request), also one whose hits exceed the limit itself: such a request fills its
 * scope's window, as the reference's increment does. `limiter.charge` consumes past the
 * limit atomically on Redis, the debt bounded by one horizon (see docs/priced.md): every
 * algorithm, the sliding window log too (whose rules are at most `MAX_PRICED_LOG_LIMIT`, the
 * bound of its charge, checked when the rules load: see policies.ts).
 *
 * @param items the takeAll's items; those whose decision refused the request are charged.
 * @returns by item index, the state after the charge (the charge's `remaining`, the scope's
 *   reset read after it) of each item charged; the others absent.
 */
async function chargeRefused(
  limiter: RateLimiter,
  items: readonly TakeAllItem[],
  decisions: readonly Decision[],
): Promise<(Outcome | undefined)[]> {
  const after: (Outcome | undefined)[] = [];
  await Promise.all(
    items.map(async (item, j) => {
      if ((decisions[j]?.retryAfterMs ?? 0) <= 0) return;
      const settled = await limiter.charge(item.scope, item.policy, item.cost ?? 1);
      const now = await limiter.peek(item.scope, item.policy);
      after[j] = { over: true, remaining: settled.remaining, resetMs: now.resetMs };
    }),
  );
  return after;
}
