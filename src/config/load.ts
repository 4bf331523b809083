/** Policy files on disk: read once, at start, and validated. */
import { readFileSync } from 'node:fs';
import { InvalidInputError } from '../errors.js';
import { policyConfigFrom } from './compile.js';
import { type DuplicateKey, duplicateKeys } from './duplicate-keys.js';
import { fieldPath } from './paths.js';
import { PolicyFileError } from './problems.js';
import type { PolicyConfig, RouteSettings } from './types.js';

/**
 * Reads a JSON policy file (once, at start) into a {@link PolicyConfig}.
 *
 * @throws {InvalidInputError} `config` when the file cannot be read or is not JSON; a
 *   {@link PolicyFileError} when a key appears twice in one object, or when its content is
 *   invalid.
 */
export function loadPolicyConfig(path: string | URL): PolicyConfig {
  return policyConfigFrom(readPolicyFile(path));
}

/**
 * Reads and validates a JSON policy file (once, at start): each route's settings, ready
 * for a guard.
 *
 * @throws {InvalidInputError} see {@link loadPolicyConfig}.
 */
export function loadPolicies(path: string | URL): ReadonlyMap<string, RouteSettings> {
  return loadPolicyConfig(path).routes;
}

/**
 * The parsed JSON of a policy file.
 *
 * @throws {InvalidInputError} `config` when it cannot be read or is not JSON; a
 *   {@link PolicyFileError} naming the path of every key that appears twice in one object.
 */
export function readPolicyFile(path: string | URL): unknown {
  try {
    return parsePolicyText(readFileSync(path, 'utf8'));
  } catch (error) {
    if (error instanceof PolicyFileError) throw error;
    const invalid = new InvalidInputError(
      'config',
      `a readable JSON file (${String(path)}: ${(error as Error).message})`,
      undefined,
      '',
    );
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
}

/**
 * The parsed JSON of a policy file's text. A key that appears twice in one object is
 * refused: `JSON.parse` would keep the last one silently, and the file would not mean what
 * it seems to say.
 *
 * @throws {SyntaxError} when the text is not JSON.
 * @throws {PolicyFileError} naming the path of every repeated key, e.g. `routes["GET/a"]`.
 */
export function parsePolicyText(text: string): unknown {
  const document: unknown = JSON.parse(text);
  const repeated = duplicateKeys(text);
  if (repeated.length > 0) throw new PolicyFileError(repeated.map(duplicateIssue));
  return document;
}

function duplicateIssue({ path, count }: DuplicateKey) {
  const times = count === 2 ? 'twice' : `${count} times`;
  return {
    field: fieldPath(path),
    expected: `a key that appears once in its object (it appears ${times})`,
    value: undefined,
  };
}
