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
  /** The descriptor's `key_value` parts as counted (see `RuleSet.match`). */
  readonly counted: readonly string[];
  /** Hits it adds; 0 = check only. */
  readonly hits: number;
  /** Over its limit, it does not refuse the request (`shadow_mode`). */
  readonly shadow: boolean;
  /** Over its limit, it does not refuse the request but is reported (`quota_mode`). */
  readonly quota: boolean;
}

export type Planned =
  | { readonly kind: 'none' }
  | { readonly kind: 'unlimited'; readonly rule: Rule }
  | { readonly kind: 'replaced'; readonly rule: Rule }
  | Limited;

/**
 * Plans every descriptor of `request` under `rules`. Hits: the descriptor's `hits_addend`
 * when set (0 = check only), else the request's when above 0, else 1; `is_negative_hits`
 * is answered as check only (sluice never gives quota back).
 */
export function plan(request: ServeRequest, rules: RuleSet, policies: Policies): Planned[] {
  const planned: Planned[] = request.descriptors.map((d) => {
    const hits = d.negativeHits ? 0 : (d.hitsAddend ?? (request.hitsAddend || 1));
    const counted = d.entries.map((e) => (e.value === '' ? e.key : `${e.key}_${e.value}`));
    if (d.override !== undefined && counted.length > 0) {
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
    if (match === undefined) return { kind: 'none' };
    const { rule } = match;
    if (rule.limit.unlimited) return { kind: 'unlimited', rule };
    return {
      kind: 'limited',
      rule,
      policy: policies.ofRule(rule),
      requestsPerUnit: rule.limit.requestsPerUnit,
      unit: rule.limit.unit as Unit,
      unitMs: rule.unitMs,
      name: rule.limit.name ?? '',
      counted: match.counted,
      hits,
      shadow: rule.shadowMode,
      quota: rule.quotaMode,
    };
  });
  const replaced = new Set<string>();
  for (const p of planned) {
    if (p.kind === 'limited' && p.rule !== undefined) {
      for (const name of p.rule.limit.replaces) replaced.add(name);
    }
  }
  if (replaced.size === 0) return planned;
  return planned.map((p) =>
    p.kind === 'limited' && p.rule?.limit.name !== undefined && replaced.has(p.rule.limit.name)
      ? { kind: 'replaced', rule: p.rule }
      : p,
  );
}
