/**
 * The settings of `sluice serve` that the reference service reads from its environment,
 * read from the same variable names, so that a deployment keeps its env when it swaps the
 * image. Those that change answers: `SHADOW_MODE`, `LIMIT_RESPONSE_HEADERS_ENABLED`,
 * `LIMIT_LIMIT_HEADER`, `LIMIT_REMAINING_HEADER`, `LIMIT_RESET_HEADER`,
 * `MERGE_DOMAIN_CONFIG`, `CACHE_KEY_PREFIX`, `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`; and
 * where things are: `RUNTIME_ROOT`, `RUNTIME_SUBDIRECTORY`, `RUNTIME_APPDIRECTORY`, `HOST`,
 * `PORT`, `GRPC_HOST`, `GRPC_PORT`, `REDIS_TYPE`, `REDIS_URL`, `REDIS_AUTH`, `REDIS_TLS`.
 * sluice's own: `SLUICE_COMPAT` (`reference`), `SLUICE_TIMEOUT_MS`, `SLUICE_MAX_IN_FLIGHT`.
 */
import { join } from 'node:path';
import { InvalidInputError } from '../errors.js';

/** How a request's descriptors are counted (see docs/serve.md). */
export type Compat = 'sluice' | 'reference';

/** The answer-changing settings. */
export interface AnswerSettings {
  /** `SHADOW_MODE`: every answer is OK (unless a request's own override is over). */
  readonly shadowMode: boolean;
  /** `LIMIT_RESPONSE_HEADERS_ENABLED`, and the three header names. */
  readonly headers:
    | { readonly limit: string; readonly remaining: string; readonly reset: string }
    | undefined;
  /** `MERGE_DOMAIN_CONFIG`. */
  readonly mergeDomains: boolean;
  /** `CACHE_KEY_PREFIX`: the start of every Redis key (sluice: the limiter's namespace). */
  readonly keyPrefix: string;
  /** `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` (reference counting only). */
  readonly stopIncrementWhenOver: boolean;
  /** `SLUICE_COMPAT`, `--compat`. */
  readonly compat: Compat;
}

type Env = Readonly<Record<string, string | undefined>>;

/** A boolean variable as the reference reads it (Go's `strconv.ParseBool`). */
export function envFlag(env: Env, name: string): boolean {
  const value = env[name];
  if (value === undefined || value === '') return false;
  if (/^(1|t|true)$/i.test(value)) return true;
  if (/^(0|f|false)$/i.test(value)) return false;
  throw new InvalidInputError(name, 'one of true, false, 1, 0', value, JSON.stringify(value));
}

/** An integer variable in `[min, max]`, or `fallback` when unset. */
export function envInteger(env: Env, name: string, fallback: number, min: number, max: number) {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max) {
    throw new InvalidInputError(
      name,
      `an integer from ${min} to ${max}`,
      value,
      JSON.stringify(value),
    );
  }
  return n;
}

/** A compat name. */
export function compatOf(value: string | undefined, field: string): Compat {
  if (value === undefined || value === '' || value === 'sluice') return 'sluice';
  if (value === 'reference') return 'reference';
  throw new InvalidInputError(field, '"sluice" or "reference"', value, JSON.stringify(value));
}

/**
 * The answer-changing settings from `env`.
 *
 * @throws {InvalidInputError} a boolean that is not one, an unknown compat.
 */
export function answerSettings(env: Env, compat?: Compat): AnswerSettings {
  return {
    shadowMode: envFlag(env, 'SHADOW_MODE'),
    headers: envFlag(env, 'LIMIT_RESPONSE_HEADERS_ENABLED')
      ? {
          limit: env.LIMIT_LIMIT_HEADER || 'RateLimit-Limit',
          remaining: env.LIMIT_REMAINING_HEADER || 'RateLimit-Remaining',
          reset: env.LIMIT_RESET_HEADER || 'RateLimit-Reset',
        }
      : undefined,
    mergeDomains: envFlag(env, 'MERGE_DOMAIN_CONFIG'),
    keyPrefix: env.CACHE_KEY_PREFIX ?? '',
    stopIncrementWhenOver: envFlag(env, 'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT'),
    compat: compat ?? compatOf(env.SLUICE_COMPAT, 'SLUICE_COMPAT'),
  };
}

/** The reference's rule directory: `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`. */
export function runtimeDirectory(env: Env): string {
  return join(
    env.RUNTIME_ROOT || '/srv/runtime_data/current',
    env.RUNTIME_SUBDIRECTORY ?? '',
    env.RUNTIME_APPDIRECTORY || 'config',
  );
}
