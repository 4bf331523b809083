/** Policy files on disk: read once, at start, and validated. */
import { readFileSync } from 'node:fs';
import { InvalidInputError } from '../errors.js';
import { policyConfigFrom } from './compile.js';
import type { PolicyConfig, RouteSettings } from './types.js';

/**
 * Reads a JSON policy file (once, at start) into a {@link PolicyConfig}.
 *
 * @throws {InvalidInputError} `config` when the file cannot be read or is not JSON; a
 *   {@link PolicyFileError} when its content is invalid.
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
 * @throws {InvalidInputError} `config` when it cannot be read or is not JSON.
 */
export function readPolicyFile(path: string | URL): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    const invalid = new InvalidInputError(
      'config',
      `a readable JSON file (${String(path)}: ${(error as Error).message})`,
      undefined,
    );
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
}
