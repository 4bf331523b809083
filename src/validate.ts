/**
 * Input checks shared by the public entry points. Each failure is an `InvalidInputError`
 * naming the field; reading a field that throws (a getter, a Proxy trap) is reported the
 * same way, never as a raw error.
 */
import { InvalidInputError } from './errors.js';

/**
 * Reads `object[property]` once. `object` must be a non-null object; `field` names it in
 * errors (e.g. `"scope"`), and `field.property` names the property.
 */
export function readProperty(object: unknown, property: string, field: string): unknown {
  if (typeof object !== 'object' || object === null) {
    throw new InvalidInputError(field, `an object with "${property}"`, object);
  }
  try {
    return (object as Record<string, unknown>)[property];
  } catch (error) {
    const invalid = new InvalidInputError(`${field}.${property}`, 'a readable property', undefined);
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
}

/**
 * Throws unless every own key of `object` is in `known`: a misspelled option (`refilTokens`)
 * is an error naming it (`<field>.refilTokens`), never silently ignored.
 */
export function rejectUnknownKeys(object: object, known: readonly string[], field: string): void {
  let keys: string[];
  try {
    keys = Object.keys(object);
  } catch (error) {
    const invalid = new InvalidInputError(field, 'an object whose keys can be read', undefined);
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
  for (const key of keys) {
    if (!known.includes(key)) {
      throw new InvalidInputError(
        `${field}.${key}`,
        `absent (an unknown key: known are ${known.join(', ')})`,
        readQuietly(object, key),
      );
    }
  }
}

/**
 * A plain copy of `object`'s own enumerable properties, each read once: what a getter or a
 * Proxy trap gives, or an `InvalidInputError` naming `field.key` (or `field`) when reading
 * throws. Checked and used afterwards, the copy cannot change between the check and the use.
 */
export function readOwnProperties(object: object, field: string): Record<string, unknown> {
  let keys: string[];
  try {
    keys = Object.keys(object);
  } catch (error) {
    const invalid = new InvalidInputError(field, 'an object whose keys can be read', undefined);
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
  const copy: Record<string, unknown> = {};
  for (const key of keys) {
    const value = readProperty(object, key, field);
    Object.defineProperty(copy, key, { value, enumerable: true, writable: true });
  }
  return copy;
}

/** `object[key]` for an error message, or undefined when reading it throws. */
function readQuietly(object: object, key: string): unknown {
  try {
    return (object as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

/** `value` when it is a safe integer in `[1, max]`, else an error naming `field`. */
export function positiveSafeInteger(
  field: string,
  value: unknown,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1 && value <= max)
    return value;
  const expected =
    max === Number.MAX_SAFE_INTEGER ? 'a positive safe integer' : `an integer from 1 to ${max}`;
  throw new InvalidInputError(field, expected, value);
}

/** Like {@link positiveSafeInteger}, with `fallback` for `undefined`. */
export function optionalPositiveInteger(
  field: string,
  value: unknown,
  fallback: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  return value === undefined ? fallback : positiveSafeInteger(field, value, max);
}

/**
 * {@link rejectUnknownKeys} for the hot path (a scope, a take's options): no array is
 * allocated unless a key is unknown. `object` must be a non-null object.
 */
export function onlyKnownKeys(object: object, known: readonly string[], field: string): void {
  try {
    for (const key in object) {
      if (!known.includes(key)) rejectUnknownKeys(object, known, field);
    }
  } catch (error) {
    if (error instanceof InvalidInputError) throw error;
    const invalid = new InvalidInputError(field, 'an object whose keys can be read', undefined);
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
}
