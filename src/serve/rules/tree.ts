/**
 * The rules of every file, as the reference service arranges them: a tree per domain, each
 * level keyed by `key_value` (or `key` alone for a descriptor without a value), wildcard
 * values (`prefix*`) kept in config order. Matching a request's descriptor follows the
 * reference: at each entry, the exact `key_value`, else the first wildcard whose prefix
 * matches, else the value-less `key`; a limit applies only at the level of the descriptor's
 * last entry.
 */
import { RuleFileError } from './errors.js';
import type { DescriptorSpec, RateLimitSpec, RuleFile } from './parse.js';
import { UNIT_MS, type Unit } from './units.js';

/** One `rate_limit` of the configuration, where it is and how it is decided. */
export interface Rule {
  /** The reference's key of the rule: `domain.key_value.key…`, as in its stats. */
  readonly fullKey: string;
  readonly domain: string;
  readonly limit: RateLimitSpec;
  readonly shadowMode: boolean;
  readonly detailedMetric: boolean;
  readonly quotaMode: boolean;
  /** The unit's length in ms (0 for an unlimited rule). */
  readonly unitMs: number;
  /** Where it is: the file and the path of its `rate_limit`, for errors found later. */
  readonly file: string;
  readonly path: string;
}

interface Node {
  readonly exact: Map<string, Node>;
  readonly wildcards: { readonly prefix: string; readonly key: string; readonly node: Node }[];
  rule: Rule | undefined;
  readonly shareThreshold: boolean;
}

/** What a request's descriptor matched: its rule and the key it is counted under. */
export interface Match {
  readonly rule: Rule;
  /**
   * The request's `key_value` pairs, one per entry, as counted: each runtime value apart,
   * but the wildcard itself for a `share_threshold` level (every matching value shares it).
   */
  readonly counted: readonly string[];
}

/** The configuration being served: every domain's tree. */
export class RuleSet {
  readonly #domains = new Map<string, Node>();
  /** The files it was built from, in load order. */
  readonly files: readonly string[];
  /** Every rule, in load order (for metrics and `/json` dumps). */
  readonly rules: readonly Rule[];

  /**
   * @param merge `MERGE_DOMAIN_CONFIG`: files of one domain are merged (else a domain in two
   *   files is an error).
   * @throws {RuleFileError} a domain in two files (without `merge`), a descriptor key twice
   *   at one level.
   */
  constructor(files: readonly RuleFile[], merge: boolean) {
    const rules: Rule[] = [];
    const fileOf = new Map<string, string>();
    for (const file of files) {
      let root = this.#domains.get(file.domain);
      if (root !== undefined && !merge) {
        throw new RuleFileError(
          file.file,
          'domain',
          `domain '${file.domain}' is in ${fileOf.get(file.domain)} too (MERGE_DOMAIN_CONFIG=true merges them)`,
        );
      }
      fileOf.set(file.domain, file.file);
      if (root === undefined) {
        root = newNode(false);
        this.#domains.set(file.domain, root);
      }
      load(file, root, file.domain, file.descriptors, rules);
    }
    this.files = files.map((f) => f.file);
    this.rules = rules;
  }

  /** Whether some file configures `domain`. */
  hasDomain(domain: string): boolean {
    return this.#domains.has(domain);
  }

  /** True when the domain has a file. */
  has(domain: string): boolean {
    return this.#domains.has(domain);
  }

  /** The rule a request's descriptor (its entries in order) matches, if any. */
  match(domain: string, entries: readonly { key: string; value: string }[]): Match | undefined {
    let level = this.#domains.get(domain);
    const counted: string[] = [];
    for (let i = 0; i < entries.length && level !== undefined; i++) {
      const entry = entries[i] as { key: string; value: string };
      const finalKey = `${entry.key}_${entry.value}`;
      let next = level.exact.get(finalKey);
      let as = finalKey;
      if (next === undefined) {
        for (const wildcard of level.wildcards) {
          if (!finalKey.startsWith(wildcard.prefix)) continue;
          next = wildcard.node;
          if (next.shareThreshold) as = wildcard.key;
          break;
        }
      }
      next ??= level.exact.get(entry.key);
      if (next === undefined) return undefined;
      counted.push(as);
      if (i === entries.length - 1) {
        return next.rule === undefined ? undefined : { rule: next.rule, counted };
      }
      level = next.exact.size > 0 || next.wildcards.length > 0 ? next : undefined;
    }
    return undefined;
  }
}

function newNode(shareThreshold: boolean): Node {
  return { exact: new Map(), wildcards: [], rule: undefined, shareThreshold };
}

function load(
  file: RuleFile,
  level: Node,
  parentKey: string,
  descriptors: readonly DescriptorSpec[],
  rules: Rule[],
): void {
  for (const d of descriptors) {
    const finalKey = d.value === '' ? d.key : `${d.key}_${d.value}`;
    const fullKey = `${parentKey}.${finalKey}`;
    if (level.exact.has(finalKey)) {
      throw new RuleFileError(file.file, `${d.path}.key`, `duplicate descriptor '${fullKey}'`);
    }
    const node = newNode(d.shareThreshold);
    if (d.rateLimit !== undefined) {
      const rule: Rule = {
        fullKey,
        domain: file.domain,
        limit: d.rateLimit,
        shadowMode: d.shadowMode,
        detailedMetric: d.detailedMetric,
        quotaMode: d.quotaMode,
        unitMs: d.rateLimit.unit === undefined ? 0 : UNIT_MS[d.rateLimit.unit as Unit],
        file: file.file,
        path: `${d.path}.rate_limit`,
      };
      node.rule = rule;
      rules.push(rule);
    }
    level.exact.set(finalKey, node);
    if (finalKey.endsWith('*')) {
      level.wildcards.push({ prefix: finalKey.slice(0, -1), key: finalKey, node });
    }
    load(file, node, fullKey, d.descriptors, rules);
  }
}
