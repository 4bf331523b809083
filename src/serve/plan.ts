/**
 * What each descriptor of a request is decided by, before anything is sent: no rule, an
 * unlimited rule, a rule another matched rule `replaces`, or a limit (the request's own
 * override, else the matched rule) with the hits it adds.
 */
import type { Policy } from '../types.js';
import type { Policies } from './policies.js';
import type { ServeRequest } from './request.js';
import type { Rule, RuleSet } from './rules/tree.js';
import type { Unit } from './rules/units.js';

/** A descriptor that is counted. */
export interface Limited {
  readonly kind: 'limited';
  /** The matched rule; undefined for the request's own override. */
  readonly rule: Rule | undefined;
  readonly policy: Policy;
  readonly requestsPerUnit: number;
  readonly unit: Unit;
  readonly unitMs: number;
  readonly name: string;
  /**
   * The descriptor's `key_value` parts as counted (see `RuleSet.match`); for an override,
   * each entry's `[key, value]` as JSON.
   */
  readonly counted: readonly string[];
  /** Hits it adds; 0 = check only. */
  readonly hits: number;
  /** Over its limit, it does not refuse the request (`shadow_mode`). */
  readonly shadow: boolean;
  /** Over its limit, it does not refuse the request but is reported (`quota_mode`). */
  readonly quota: boolean;
}

/**
 * A rule of `requests_per_unit: 0` (or none given, the reference's uint32 default): every
 * request is over it, decided without Redis, as the reference answers it.
 */
export interface Denied extends Omit<Limited, 'kind' | 'policy' | 'hits' | 'rule'> {
  readonly kind: 'denied';
  readonly rule: Rule;
}

export type Planned =
  | { readonly kind: 'none' }
  | Denied
  | { readonly kind: 'unlimited'; readonly rule: Rule }
  | { readonly kind: 'replaced'; readonly rule: Rule }
  | Limited;

/**
 * Plans every descriptor of `request` under `rules`. Hits: the descriptor's `hits_addend`
 * when set (0 = check only), else the request's when above 0, else 1; `is_negative_hits`
 * is answered as check only (sluice never gives quota back).
 */
export function plan(request: ServeRequest, rules: RuleSet, policies: Policies): Planned[] {
  const descriptors = request.descriptors;
  const planned: Planned[] = new Array(descriptors.length);
  // An unknown domain has no limit, overrides included (the reference's GetLimit).
  if (!rules.hasDomain(request.domain)) return planned.fill(NONE);
  let replaces = false;
  for (let i = 0; i < descriptors.length; i++) {
    const d = descriptors[i] as (typeof descriptors)[number];
    const p = planOne(request, d, rules, policies);
    if ((p.kind === 'limited' || p.kind === 'denied') && p.rule !== undefined) {
      if (p.rule.limit.replaces.length > 0) replaces = true;
    }
    planned[i] = p;
  }
  if (!replaces) return planned;
  const replaced = new Set<string>();
  for (const p of planned) {
    if ((p.kind === 'limited' || p.kind === 'denied') && p.rule !== undefined) {
      for (const name of p.rule.limit.replaces) replaced.add(name);
    }
  }
  return planned.map((p) =>
    (p.kind === 'limited' || p.kind === 'denied') &&
    p.rule?.limit.name !== undefined &&
    replaced.has(p.rule.limit.name)
      ? { kind: 'replaced', rule: p.rule }
      : p,
  );
}

/** A descriptor without a rule (one object: it says nothing else). */
const NONE: Planned = Object.freeze({ kind: 'none' });

function planOne(
  request: ServeRequest,
  d: ServeRequest['descriptors'][number],
  rules: RuleSet,
  policies: Policies,
): Planned {
  const hits = d.negativeHits ? 0 : (d.hitsAddend ?? (request.hitsAddend || 1));
  if (d.override !== undefined && d.entries.length > 0) {
    // Keys are the request's own here: each entry as a [key, value] pair, so that no two
    // descriptors share a counter (`k_v` = '' and `k` = `v` would, as `key_value`).
    const counted = d.entries.map((e) => JSON.stringify([e.key, e.value]));
    const { requestsPerUnit, unit } = d.override;
    const policy = policies.ofOverride(requestsPerUnit, unit);
    return {
      kind: 'limited',
      rule: undefined,
      policy,
      requestsPerUnit,
      unit,
      unitMs: policy.quotaWindowMs,
      name: '',
      counted,
      hits,
      shadow: false,
      quota: false,
    };
  }
  const match = rules.match(request.domain, d.entries);
  if (match === undefined) return NONE;
  const { rule } = match;
  if (rule.limit.unlimited) return { kind: 'unlimited', rule };
  const requestsPerUnit = rule.limit.requestsPerUnit;
  const unit = rule.limit.unit as Unit;
  const name = rule.limit.name ?? '';
  if (requestsPerUnit === 0) {
    return {
      kind: 'denied',
      rule,
      requestsPerUnit,
      unit,
      unitMs: rule.unitMs,
      name,
      counted: match.counted,
      shadow: rule.shadowMode,
      quota: rule.quotaMode,
    };
  }
  return {
    kind: 'limited',
    rule,
    policy: policies.ofRule(rule),
    requestsPerUnit,
    unit,
    unitMs: rule.unitMs,
    name,
    counted: match.counted,
    hits,
    shadow: rule.shadowMode,
    quota: rule.quotaMode,
  };
}
