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
import { MAX_TAKE_ALL_ITEMS } from '../bounds.js';
import type { RateLimiter } from '../limiter/rate-limiter.js';
import type { ScriptStore } from '../stores/store.js';
import type { Decision, Scope, TakeAllItem } from '../types.js';
import { type Limited, type Planned, plan } from './plan.js';
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
import type { RuleSet } from './rules/tree.js';
import type { AnswerSettings } from './settings.js';

/** No valid configuration is loaded: answered as `UNAVAILABLE`. */
export class NoConfigError extends Error {
  constructor() {
    super('no valid rate limit configuration is loaded');
    this.name = 'NoConfigError';
  }
}

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
  /** Called once per descriptor with its metric key and outcome. */
  readonly onDescriptor?: (domain: string, key: string, outcome: DescriptorOutcome) => void;
}

export class Decider {
  readonly #o: DeciderOptions;

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
    const limited = planned.filter((p) => p.kind === 'limited').length;
    if (limited > MAX_TAKE_ALL_ITEMS) {
      // One atomic call each way, and a script's time is bounded by its keys.
      throw new BadRequestError(
        `at most ${MAX_TAKE_ALL_ITEMS} limited descriptors per request are decided in one atomic call; received ${limited}`,
      );
    }
    const outcomes =
      this.#o.settings.compat === 'reference'
        ? await this.#reference(request.domain, planned)
        : await this.#sluice(request.domain, planned);
    return this.#answer(request.domain, planned, outcomes);
  }

  /** sluice's counting; the outcomes by descriptor index. */
  async #sluice(domain: string, planned: readonly Planned[]): Promise<(Outcome | undefined)[]> {
    const limiter = this.#o.limiter;
    const outcomes: (Outcome | undefined)[] = planned.map(() => undefined);
    const items: TakeAllItem[] = [];
    const itemOf: number[] = []; // descriptor index → item index (enforced ones)
    const seen = new Map<string, number>();
    const pending: Promise<void>[] = [];
    planned.forEach((p, i) => {
      if (p.kind !== 'limited') return;
      // Structure-safe: ["a_b.c"] and ["a_b", "c"] are two scopes.
      const scope: Scope = { tenant: domain, route: JSON.stringify(p.counted) };
      if (p.hits === 0) {
        pending.push(
          limiter.peek(scope, p.policy).then((d) => {
            outcomes[i] = fromDecision(d, !d.allowed);
          }),
        );
      } else if (p.shadow || p.quota) {
        pending.push(
          limiter.take(scope, p.policy, { cost: p.hits }).then((d) => {
            outcomes[i] = fromDecision(d, !d.allowed);
          }),
        );
      } else {
        // The same counter twice in one request: one item, the hits added up.
        const id = `${p.policy.id}\0${scope.route}`;
        const at = seen.get(id);
        if (at === undefined) {
          seen.set(id, items.length);
          itemOf[i] = items.length;
          items.push({ scope, policy: p.policy, cost: p.hits });
        } else {
          itemOf[i] = at;
          const item = items[at] as TakeAllItem;
          items[at] = { ...item, cost: (item.cost ?? 1) + p.hits };
        }
      }
    });
    if (items.length > 0) {
      pending.push(
        limiter.takeAll(items).then(async (result) => {
          if (!result.allowed) {
            await chargeRefused(
              limiter,
              items.filter((_, j) => (result.decisions[j]?.retryAfterMs ?? 0) > 0),
            );
          }
          planned.forEach((_, i) => {
            const j = itemOf[i];
            if (j === undefined) return;
            const d = result.decisions[j] as Decision;
            outcomes[i] = fromDecision(d, !result.allowed && d.retryAfterMs > 0);
          });
        }),
      );
    }
    await Promise.all(pending);
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
    const violations: StructValue[] = [];
    let quotaRules = false;
    let tightest: { status: DescriptorStatus; resetMs: number } | undefined;
    const statuses = planned.map((p, i): DescriptorStatus => {
      if (p.kind === 'none') {
        report?.(domain, '', 'no_rule');
        return { code: 'OK', limit_remaining: 0 };
      }
      if (p.kind === 'unlimited' || p.kind === 'replaced') {
        report?.(domain, p.rule.fullKey, p.kind);
        return {
          code: 'OK',
          limit_remaining: p.kind === 'unlimited' ? UNLIMITED_REMAINING : 0,
        };
      }
      const o = outcomes[i] as Outcome;
      if (p.quota) quotaRules = true;
      let code: Code = 'OK';
      let outcome: DescriptorOutcome = 'ok';
      if (o.over && p.shadow) outcome = 'shadow_over_limit';
      else if (o.over && p.quota) {
        outcome = 'quota_over_limit';
        violations.push({ numberValue: i });
      } else if (o.over) {
        code = 'OVER_LIMIT';
        outcome = 'over_limit';
        over = true;
        if (p.rule === undefined) overrideOver = true;
      }
      const key =
        p.rule === undefined
          ? `${domain}.${p.counted.join('.')}`
          : p.rule.detailedMetric
            ? `${domain}.${p.counted.join('.')}`
            : p.rule.fullKey;
      report?.(domain, key, outcome);
      const status: DescriptorStatus = {
        code,
        current_limit: { requests_per_unit: p.requestsPerUnit, unit: p.unit, name: p.name },
        limit_remaining: Math.min(o.remaining, UNLIMITED_REMAINING),
        duration_until_reset: durationOf(o.resetMs),
      };
      if (tightest === undefined || status.limit_remaining < tightest.status.limit_remaining) {
        tightest = { status, resetMs: o.resetMs };
      }
      return status;
    });
    const overall: Code = (settings.shadowMode ? overrideOver : over) ? 'OVER_LIMIT' : 'OK';
    const headers: { key: string; value: string }[] = [];
    if (settings.headers !== undefined && tightest !== undefined) {
      const limit = tightest.status.current_limit;
      headers.push(
        { key: settings.headers.limit, value: String(limit?.requests_per_unit ?? 0) },
        { key: settings.headers.remaining, value: String(tightest.status.limit_remaining) },
        { key: settings.headers.reset, value: String(Math.ceil(tightest.resetMs / 1000)) },
      );
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
          quotaModeViolations: { listValue: { values: violations } },
        },
      },
    };
  }
}

function fromDecision(d: Decision, over: boolean): Outcome {
  return { over, remaining: d.remaining, resetMs: d.resetMs };
}

/**
 * Counts, as the reference does, the descriptors that refused a request, and only those
 * (a refused request spends no quota that did not refuse it): so Envoy's check-then-debit
 * flow (`hits_addend: 0`, then the real hits when the stream ends) stays bounded — a debit
 * that goes over still counts, and the next check sees the scope over. `limiter.charge`
 * consumes past the limit atomically on Redis, the debt bounded by one horizon (see
 * docs/priced.md). A sliding window log cannot be charged (its members carry running
 * totals): its refused debit counts nothing, as a refused take.
 *
 * @param items the takeAll items that refused the request (never those that would have fit).
 */
async function chargeRefused(limiter: RateLimiter, items: readonly TakeAllItem[]) {
  await Promise.all(
    items
      .filter((item) => item.policy.algorithm !== 'sliding-window-log')
      .map((item) => limiter.charge(item.scope, item.policy, item.cost ?? 1)),
  );
}
