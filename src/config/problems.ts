/**
 * The problems of a policy document: each one names its path in the file the user wrote,
 * and all of them are collected, in the order of the file.
 */
import type { z } from 'zod';
import { InvalidInputError } from '../errors.js';
import { fieldPath, knownKeys, type Path, type Segment, suggestion, valueAt } from './paths.js';
import { ALGORITHMS } from './schema.js';

/** One problem: the path of the field in the file, what it must be, what it is. */
export interface Issue {
  readonly field: string;
  readonly expected: string;
  readonly value: unknown;
  /** How the message shows `value` (as `shown` writes it: a string as written, cut at 60 characters); `''`: not at all. */
  readonly received?: string;
}

/**
 * A value of the policy file (or of a command's option), as a message shows it: the operator
 * wrote it, so a string is shown as written (JSON, control characters escaped; a longer one
 * cut at 60 characters, with its length), numbers and booleans as they are, an absent value
 * not at all, anything else by its type.
 */
export function shown(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') {
    if (value.length <= 60) return `string ${JSON.stringify(value)}`;
    return `string ${JSON.stringify(`${value.slice(0, 60)}…`)} (${value.length.toLocaleString('en-US')} characters)`;
  }
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  return new InvalidInputError('x', 'y', value).received;
}

/** How a message shows a required field the file does not have. */
export const MISSING = 'nothing (the field is missing)';

/** The `InvalidInputError` of one problem, its value shown as the file has it. */
export function issueError(issue: Issue): InvalidInputError {
  return new InvalidInputError(
    issue.field,
    issue.expected,
    issue.value,
    issue.received ?? shown(issue.value),
  );
}

/**
 * A policy file with problems: an {@link InvalidInputError} naming the first problem's path
 * (its `field`), carrying every problem found in `issues`.
 */
export class PolicyFileError extends InvalidInputError {
  /** Every problem, in the order of the file; each `field` is a path in the file. */
  readonly issues: readonly InvalidInputError[];

  constructor(issues: readonly Issue[]) {
    const first = issues[0] as Issue;
    super(first.field, first.expected, first.value, first.received ?? shown(first.value));
    this.issues = issues.map(issueError);
    if (issues.length > 1) {
      this.message = `${this.message} (and ${issues.length - 1} more: ${this.issues
        .slice(1)
        .map((issue) => issue.field)
        .join(', ')})`;
    }
  }
}

/** Maps a path in the document being compiled to the path of the same field in the file. */
export type Origin = (path: Path) => Path;

/** The problems found so far, with the paths of the file. */
export class Problems {
  readonly list: Issue[] = [];

  /** `origin` maps the paths of the document checked to those of the file. */
  constructor(private readonly origin: Origin = (path) => path) {}

  /** The path of the file for `path`, as errors write it. */
  where(path: Path): string {
    return fieldPath(this.origin(path));
  }

  /** A problem at `path`; `received` (see {@link Issue}) when `shown(value)` would not say it. */
  add(path: Path, expected: string, value: unknown, received?: string): void {
    this.list.push({
      field: this.where(path),
      expected,
      value,
      ...(received === undefined ? {} : { received }),
    });
  }

  /** A required field that the file does not have, at `path`. */
  missing(path: Path, expected: string): void {
    this.list.push({ field: this.where(path), expected, value: undefined, received: MISSING });
  }

  /** Adds zod's issues for `input` (parsed at `path`); returns the data when valid. */
  parse<T>(schema: z.ZodType<T>, input: unknown, path: Path): T | undefined {
    const parsed = schema.safeParse(input);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) {
      const at = [...path, ...(issue.path as Segment[])];
      const value = valueAt(input, issue.path as Segment[]);
      if (issue.code === 'unrecognized_keys') {
        const known = knownKeys(schema, value);
        for (const key of issue.keys) {
          this.add(
            [...at, key],
            `absent (not a field here${suggestion(key, known)})`,
            valueAt(value, [key]),
          );
        }
      } else if (issue.code === 'invalid_union' && 'discriminator' in issue) {
        const expected = `one of ${ALGORITHMS.map((a) => `"${a}"`).join(', ')}`;
        if (value === undefined) this.missing(at, expected);
        else this.add(at, expected, value);
      } else if (value === undefined && issue.code === 'invalid_type') {
        this.missing(at, issue.message);
      } else {
        this.add(at, issue.message, value);
      }
    }
    return undefined;
  }
}

/** True for a plain object of the document (not null, not an array). */
export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The own entries of a map in the document, or a problem when it is not an object. */
export function entriesOf(
  problems: Problems,
  value: unknown,
  path: Path,
  expected: string,
): [string, unknown][] {
  if (value === undefined) return [];
  if (!isObject(value)) {
    problems.add(path, expected, value);
    return [];
  }
  return Object.keys(value).map((key) => [key, value[key]]);
}
