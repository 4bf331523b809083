/**
 * One rule file of the reference service (envoyproxy/ratelimit), parsed and checked: YAML
 * with `domain` and nested `descriptors` (`key`, `value`, `rate_limit`, `shadow_mode`,
 * `detailed_metric`, `quota_mode`, `share_threshold`, `descriptors`), `rate_limit` with
 * `unit`, `requests_per_unit`, `name`, `unlimited`, `replaces: [{ name }]` — plus sluice's
 * extension, `algorithm` (and `burst`). Unknown keys and bad values are a
 * {@link RuleFileError} naming the file and the path.
 */
import { parseDocument } from 'yaml';
import { RuleFileError } from './errors.js';
import { type Unit, unitOf } from './units.js';

/** The algorithms a `rate_limit` may name (sluice's extension); default `fixed-window`. */
export const ALGORITHMS = [
  'fixed-window',
  'token-bucket',
  'gcra',
  'sliding-window-log',
  'sliding-window-counter',
] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

/** A `rate_limit` block, checked. */
export interface RateLimitSpec {
  readonly unit: Unit | undefined;
  readonly requestsPerUnit: number;
  readonly unlimited: boolean;
  readonly name: string | undefined;
  readonly replaces: readonly string[];
  readonly algorithm: Algorithm;
  /** Token bucket capacity / GCRA burst; undefined: `requests_per_unit`. */
  readonly burst: number | undefined;
}

/** A descriptor of the file, checked. */
export interface DescriptorSpec {
  readonly key: string;
  /** `''` when the descriptor has no value (each runtime value counted apart). */
  readonly value: string;
  readonly rateLimit: RateLimitSpec | undefined;
  readonly shadowMode: boolean;
  readonly detailedMetric: boolean;
  readonly quotaMode: boolean;
  readonly shareThreshold: boolean;
  readonly descriptors: readonly DescriptorSpec[];
  /** Its path in the file, for errors found later (a duplicate key). */
  readonly path: string;
}

/** A rule file, checked. */
export interface RuleFile {
  readonly file: string;
  readonly domain: string;
  readonly descriptors: readonly DescriptorSpec[];
}

const ROOT_KEYS = new Set(['domain', 'descriptors']);
const DESCRIPTOR_KEYS = new Set([
  'key',
  'value',
  'rate_limit',
  'descriptors',
  'shadow_mode',
  'detailed_metric',
  'quota_mode',
  'share_threshold',
]);
const RATE_LIMIT_KEYS = new Set([
  'unit',
  'requests_per_unit',
  'unlimited',
  'name',
  'replaces',
  'algorithm',
  'burst',
]);
/**
 * The most alias expansions one file may have (yaml's `maxAliasCount`, count × uses): large
 * enough for a ConfigMap that anchors one `rate_limit` and uses it on thousands of
 * descriptors (the reference's yaml.v2 loads those), bounded against an expansion attack.
 */
export const MAX_ALIAS_COUNT = 100_000;
/** The largest `requests_per_unit` (the API's uint32). */
const MAX_UINT32 = 4_294_967_295;

type Fields = Record<string, unknown>;

/**
 * Parses and checks one rule file.
 *
 * @param file how the file is named in errors (its path as given).
 * @throws {RuleFileError} YAML that does not parse, a key given twice, an unknown key, a value
 *   of the wrong type or out of range, an empty domain or key, a unit missing or unknown (or
 *   given with `unlimited`), an empty `replaces` name or one naming its own rule,
 *   `share_threshold` without a wildcard value.
 */
export function parseRuleFile(file: string, text: string): RuleFile {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  const first = doc.errors[0];
  if (first !== undefined) {
    throw new RuleFileError(file, '(document)', `not valid YAML: ${first.message.split('\n')[0]}`);
  }
  let root: unknown;
  try {
    root = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    // Aliases past the bound (an expansion attack), or an alias to no anchor.
    throw new RuleFileError(file, '(document)', `not valid YAML: ${(error as Error).message}`);
  }
  const fail = (path: string, reason: string) => new RuleFileError(file, path, reason);
  const map = asMap(root, '(document)', fail);
  unknownKeys(map, ROOT_KEYS, '', fail);
  const domain = map.domain;
  if (typeof domain !== 'string' || domain === '') {
    throw fail('domain', 'must be a non-empty string (the domain Envoy sends)');
  }
  return { file, domain, descriptors: descriptorList(map.descriptors, 'descriptors', fail) };
}

type Fail = (path: string, reason: string) => RuleFileError;

function asMap(value: unknown, path: string, fail: Fail): Fields {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw fail(path, `must be a mapping; received ${kind(value)}`);
  }
  return value as Fields;
}

function unknownKeys(map: Fields, known: ReadonlySet<string>, prefix: string, fail: Fail): void {
  for (const key of Object.keys(map)) {
    if (!known.has(key)) {
      throw fail(`${prefix}${key}`, `unknown key (expected one of ${[...known].join(', ')})`);
    }
  }
}

function descriptorList(value: unknown, path: string, fail: Fail): DescriptorSpec[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw fail(path, `must be a list; received ${kind(value)}`);
  return value.map((item, i) => descriptor(item, `${path}[${i}]`, fail));
}

function descriptor(value: unknown, path: string, fail: Fail): DescriptorSpec {
  const map = asMap(value, path, fail);
  unknownKeys(map, DESCRIPTOR_KEYS, `${path}.`, fail);
  const key = map.key;
  if (typeof key !== 'string' || key === '') {
    throw fail(`${path}.key`, 'must be a non-empty string');
  }
  const given = map.value;
  if (given !== undefined && given !== null && typeof given !== 'string') {
    throw fail(`${path}.value`, `must be a string; received ${kind(given)}`);
  }
  const valueText = typeof given === 'string' ? given : '';
  const shareThreshold = flag(map, 'share_threshold', path, fail);
  if (shareThreshold && !valueText.endsWith('*')) {
    throw fail(`${path}.share_threshold`, 'needs a wildcard value (one ending in *)');
  }
  const rateLimit =
    map.rate_limit === undefined || map.rate_limit === null
      ? undefined
      : rateLimitSpec(map.rate_limit, `${path}.rate_limit`, fail);
  return {
    key,
    value: valueText,
    rateLimit,
    shadowMode: flag(map, 'shadow_mode', path, fail),
    detailedMetric: flag(map, 'detailed_metric', path, fail),
    quotaMode: flag(map, 'quota_mode', path, fail),
    shareThreshold,
    descriptors: descriptorList(map.descriptors, `${path}.descriptors`, fail),
    path,
  };
}

function rateLimitSpec(value: unknown, path: string, fail: Fail): RateLimitSpec {
  const map = asMap(value, path, fail);
  unknownKeys(map, RATE_LIMIT_KEYS, `${path}.`, fail);
  const unlimited = flag(map, 'unlimited', path, fail);
  const unitText = map.unit;
  if (unitText !== undefined && typeof unitText !== 'string') {
    throw fail(`${path}.unit`, `must be a string; received ${kind(unitText)}`);
  }
  const unit = unitText === undefined ? undefined : unitOf(unitText);
  if (unlimited && unit !== undefined) {
    throw fail(`${path}.unit`, 'must not be given with unlimited: true');
  }
  if (!unlimited && unit === undefined) {
    throw fail(
      `${path}.unit`,
      `must be one of second, minute, hour, day, week, month, year; received ${unitText === undefined ? 'nothing' : JSON.stringify(unitText)}`,
    );
  }
  const name = optionalString(map, 'name', path, fail);
  const replaces = replacesList(map.replaces, `${path}.replaces`, name, fail);
  const algorithm = map.algorithm ?? 'fixed-window';
  if (!ALGORITHMS.includes(algorithm as Algorithm)) {
    throw fail(`${path}.algorithm`, `must be one of ${ALGORITHMS.join(', ')}`);
  }
  // 0, or none (the reference's uint32 default): every request over the limit, as there.
  const requestsPerUnit = count(map, 'requests_per_unit', path, fail, 0);
  const burst =
    map.burst === undefined
      ? undefined
      : count(map, 'burst', path, fail, 1, Math.max(1, requestsPerUnit));
  if (burst !== undefined && algorithm !== 'token-bucket' && algorithm !== 'gcra') {
    throw fail(`${path}.burst`, 'applies to algorithm token-bucket or gcra only');
  }
  return {
    unit,
    requestsPerUnit,
    unlimited,
    name,
    replaces,
    algorithm: algorithm as Algorithm,
    burst,
  };
}

function replacesList(
  value: unknown,
  path: string,
  own: string | undefined,
  fail: Fail,
): readonly string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw fail(path, `must be a list; received ${kind(value)}`);
  return value.map((item, i) => {
    const map = asMap(item, `${path}[${i}]`, fail);
    unknownKeys(map, new Set(['name']), `${path}[${i}].`, fail);
    const name = map.name;
    if (typeof name !== 'string' || name === '') {
      throw fail(`${path}[${i}].name`, 'must be a non-empty string');
    }
    if (name === own) throw fail(`${path}[${i}].name`, 'must not name its own rate limit');
    return name;
  });
}

function flag(map: Fields, key: string, path: string, fail: Fail): boolean {
  const value = map[key];
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') {
    throw fail(`${path}.${key}`, `must be true or false; received ${kind(value)}`);
  }
  return value;
}

function optionalString(map: Fields, key: string, path: string, fail: Fail): string | undefined {
  const value = map[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '') {
    throw fail(`${path}.${key}`, 'must be a non-empty string');
  }
  return value;
}

function count(map: Fields, key: string, path: string, fail: Fail, min: number, atLeast = min) {
  const value = map[key];
  if (value === undefined && min === 0) return 0;
  const low = Math.max(min, atLeast);
  if (typeof value !== 'number' || !Number.isInteger(value) || value < low || value > MAX_UINT32) {
    throw fail(
      `${path}.${key}`,
      `must be an integer from ${low} to ${MAX_UINT32}; received ${value === undefined ? 'nothing' : kind(value)}`,
    );
  }
  return value;
}

/** A value's kind for an error (never a string's text: the path says where it is). */
function kind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'number') return `the number ${value}`;
  if (typeof value === 'object') return 'a mapping';
  return `a ${typeof value}`;
}
