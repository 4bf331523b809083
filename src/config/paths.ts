/**
 * Paths in a policy document and field names: a path as errors write it, the value at a
 * path, and the suggestion for a misspelled field.
 */
import type { z } from 'zod';

/** One step of a path: an object key or an array index. */
export type Segment = string | number;
/** A path in the document, from its top. */
export type Path = readonly Segment[];

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * A path in the document as written in errors: `routes["POST/orders"].policy[1].limit`,
 * `plans.pro["GET/search"]`, `tenants.acme.plan`.
 */
export function fieldPath(path: Path): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else if (IDENTIFIER.test(segment)) text += text === '' ? segment : `.${segment}`;
    else text += `[${JSON.stringify(segment)}]`;
  }
  return text === '' ? 'config' : text;
}

/** The value at `path` in `input` (own properties only), or undefined. */
export function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const segment of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = Object.hasOwn(value, segment)
      ? (value as Record<PropertyKey, unknown>)[segment]
      : undefined;
  }
  return value;
}

/** The fields an object of `schema` may have (a discriminated union: `value`'s option's). */
export function knownKeys(schema: z.ZodType, value: unknown): readonly string[] {
  const shapeKeys = (s: unknown) => Object.keys((s as { shape?: object }).shape ?? {});
  const options = (schema as { options?: readonly unknown[] }).options;
  if (options === undefined) return shapeKeys(schema);
  const algorithm = (value as { algorithm?: unknown } | undefined)?.algorithm;
  const option = options.find(
    (o) => (o as { shape: { algorithm: { value: unknown } } }).shape.algorithm.value === algorithm,
  );
  return option === undefined ? [] : shapeKeys(option);
}

/** `; did you mean "burst"?` for a key one or two edits from a known field. */
export function suggestion(key: string, known: readonly string[]): string {
  const close = known.find((k) => distance(k.toLowerCase(), key.toLowerCase()) <= 2);
  if (close !== undefined) return `; did you mean "${close}"?`;
  if (key === 'per') return '; to count a policy on another scope, write { "policy": …, "per": … }';
  return known.length === 0 ? '' : `; known: ${known.join(', ')}`;
}

/** The edit distance (Levenshtein) between two strings. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(
        (row[j] as number) + 1,
        (next[j - 1] as number) + 1,
        (row[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    row = next;
  }
  return row[b.length] as number;
}
