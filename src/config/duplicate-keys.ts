/**
 * Keys that appear more than once in one object of a JSON text. `JSON.parse` keeps the
 * last of them without a word, so a policy file's reader looks for them in the text.
 *
 * The scanner runs only on text that `JSON.parse` accepted, so it needs no error handling
 * of its own: it walks the structure (`{`, `[`, `,`, `:` and strings) and skips every
 * other character (white space, numbers, `true`, `false`, `null`, none of which holds a
 * structural character or a quote).
 */
import type { Path, Segment } from './paths.js';

/** A key that appears more than once in its object. */
export interface DuplicateKey {
  /** The path of the key: its object's path, then the key. */
  readonly path: Path;
  /** How many times the key appears in its object (2 or more). */
  readonly count: number;
}

/** An object or an array being scanned. */
interface Container {
  readonly path: Path;
  /** An object's keys so far: each seen once (null) or repeated (its entry in the result). */
  readonly keys?: Map<string, { path: Path; count: number } | null>;
  /** In an object: the key of the value being read; true while a key is expected. */
  key: string | true;
  /** In an array: the index of the item being read. */
  index: number;
}

/**
 * Every key of `text` (valid JSON) that appears more than once in one object, in the order
 * of its second appearance, with its path and how many times it appears. Keys are compared
 * as `JSON.parse` compares them: after escapes are decoded (`"a"` and `"\u0061"` are one key).
 */
export function duplicateKeys(text: string): DuplicateKey[] {
  const found: { path: Path; count: number }[] = [];
  const stack: Container[] = [];
  let i = 0;
  while (i < text.length) {
    const top = stack.at(-1);
    const char = text[i];
    if (char === '{' || char === '[') {
      const path = top === undefined ? [] : [...top.path, segmentIn(top)];
      stack.push(
        char === '{'
          ? { path, keys: new Map(), key: true, index: 0 }
          : { path, key: true, index: 0 },
      );
      i++;
    } else if (char === '}' || char === ']') {
      stack.pop();
      i++;
    } else if (char === ',' && top !== undefined) {
      if (top.keys === undefined) top.index++;
      else top.key = true;
      i++;
    } else if (char === '"') {
      const end = stringEnd(text, i);
      if (top?.keys !== undefined && top.key === true) {
        top.key = JSON.parse(text.slice(i, end)) as string;
        countKey(top, top.key, found);
      }
      i = end;
    } else {
      i++;
    }
  }
  return found;
}

/** The segment of the value being read in `container`: its key, or its index. */
function segmentIn(container: Container): Segment {
  return container.keys === undefined ? container.index : (container.key as string);
}

/** Counts one appearance of `key` in `object`; its second appearance adds it to `found`. */
function countKey(object: Container, key: string, found: { path: Path; count: number }[]): void {
  const keys = object.keys as NonNullable<Container['keys']>;
  const seen = keys.get(key);
  if (seen === undefined) {
    keys.set(key, null);
  } else if (seen === null) {
    const entry = { path: [...object.path, key], count: 2 };
    keys.set(key, entry);
    found.push(entry);
  } else {
    seen.count++;
  }
}

/** The index just past the string that starts at `start` (its opening quote). */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
  return i + 1;
}
