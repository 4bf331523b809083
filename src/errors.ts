/**
 * The error family of sluice.
 *
 * A rate-limit *denial* is never an error: `take` resolves with `{ allowed: false, … }`.
 * Errors are reserved for the cases where no decision could be made (or the input was
 * wrong), so that callers can tell "limited" from "the limiter failed" — the HTTP layer
 * maps the first to `429` and the second to `503` (fail-closed) or a local fallback
 * (fail-open).
 *
 * Every error has a stable `code` for programmatic checks; messages are for humans and may
 * change.
 */

/** Stable codes of every sluice error. */
export type SluiceErrorCode =
  | 'SLUICE_INVALID_INPUT'
  | 'SLUICE_TIMEOUT'
  | 'SLUICE_UNAVAILABLE'
  | 'SLUICE_OVERLOAD'
  | 'SLUICE_STORE_ERROR'
  | 'SLUICE_REDIS_CONFIG';

/** Where the errors reference is: each code has a section, its anchor the code in lowercase. */
const ERRORS_REFERENCE = 'https://github.com/sluice-js/sluice/blob/main/docs/errors.md';

/** Base class of every error sluice throws or rejects with. */
export class SluiceError extends Error {
  /** Stable, machine-readable code. */
  readonly code: SluiceErrorCode;

  constructor(code: SluiceErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }

  /**
   * The section of the errors reference (docs/errors.md) on this error's code: what it means,
   * when it is thrown, what to do, and how the HTTP layer answers it.
   */
  get docs(): string {
    return `${ERRORS_REFERENCE}#${this.code.toLowerCase()}`;
  }
}

/**
 * Bad input: a scope, policy or option that does not meet its contract. Thrown before any
 * Redis command is sent, so nothing in Redis changes.
 */
export class InvalidInputError extends SluiceError {
  /** The path of the offending field, e.g. `"scope.tenant"` or `"policy.limit"`. */
  readonly field: string;
  /** What the field must be, e.g. `"a positive safe integer"`. */
  readonly expected: string;
  /**
   * A short, safe description of what was received (type and, for numbers, the value); empty
   * when nothing was received that could be shown (a key given twice, a file not read).
   */
  readonly received: string;

  /**
   * @param received how to show `value` in the message; by default its type (and, for
   *   numbers, the value), never a string's text, which may come from a client. `''` leaves
   *   it out.
   */
  constructor(field: string, expected: string, value: unknown, received = describe(value)) {
    super(
      'SLUICE_INVALID_INPUT',
      received === ''
        ? `${field} must be ${expected}`
        : `${field} must be ${expected}; received ${received}`,
    );
    this.field = field;
    this.expected = expected;
    this.received = received;
  }
}

/**
 * The call's deadline passed before Redis answered. The script may still have run on the
 * server and consumed quota; sluice never compensates for that (no "refund").
 */
export class TimeoutError extends SluiceError {
  /** The deadline that passed, in milliseconds. */
  readonly timeoutMs: number;

  constructor(timeoutMs: number) {
    super('SLUICE_TIMEOUT', `rate limiter call exceeded its ${timeoutMs} ms deadline`);
    this.timeoutMs = timeoutMs;
  }
}

/**
 * Redis could not be reached: the client is closed, not connected (sluice never queues
 * commands offline), or the connection dropped while the call was in flight.
 */
export class UnavailableError extends SluiceError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SLUICE_UNAVAILABLE', message, options);
  }
}

/**
 * Too many calls were already in flight (`maxInFlight`); this call was rejected at once,
 * without being sent, so an outage cannot pile up unbounded pending work.
 */
export class OverloadError extends SluiceError {
  /** The cap that was reached. */
  readonly maxInFlight: number;

  constructor(maxInFlight: number) {
    super('SLUICE_OVERLOAD', `rate limiter has ${maxInFlight} calls in flight (maxInFlight)`);
    this.maxInFlight = maxInFlight;
  }
}

/**
 * Redis answered with an error reply (for example `WRONGTYPE` for a key written by
 * something else, or `OOM` under `maxmemory`). `redisCode` is the reply's first word.
 */
export class StoreError extends SluiceError {
  /** The Redis error prefix, e.g. `"WRONGTYPE"`, `"OOM"`, `"ERR"`. */
  readonly redisCode: string;

  constructor(message: string, options?: { cause?: unknown }) {
    super('SLUICE_STORE_ERROR', `Redis replied with an error: ${message}`, options);
    this.redisCode = /^[A-Z]+/.exec(message)?.[0] ?? 'ERR';
  }
}

/**
 * Why Redis refused a connection that reached it: a setup mistake, not an outage.
 *
 * - `wrong-password`: `WRONGPASS` (wrong password, unknown or disabled ACL user);
 * - `auth-required`: `NOAUTH` (the server requires a password and none was given);
 * - `no-permission`: `NOPERM` (the ACL user may not run what sluice needs: a script, or a
 *   command or key a script uses);
 * - `database`: the `database` index does not exist on the server;
 * - `tls`: the TLS handshake failed (a `rediss://` URL to a plain server, an untrusted
 *   certificate, a name mismatch).
 */
export type RedisConfigReason =
  | 'wrong-password'
  | 'auth-required'
  | 'no-permission'
  | 'database'
  | 'tls';

/**
 * Redis was reached but refused the configuration — a password, an ACL permission, the
 * database index, TLS: retrying cannot help, the configuration must change. Raised by
 * `connectRedis` at start, and by a take when Redis refuses it for the same reasons on a
 * running connection (`NOAUTH`, `WRONGPASS`, `NOPERM`, or a reconnect refused after a
 * password was rotated), instead of `UnavailableError`: a mistake to fix, never an outage.
 */
export class RedisConfigError extends SluiceError {
  /** What was wrong (see {@link RedisConfigReason}). */
  readonly reason: RedisConfigReason;

  constructor(reason: RedisConfigReason, message: string, options?: { cause?: unknown }) {
    super(
      'SLUICE_REDIS_CONFIG',
      `Redis refused the configuration (${reason}): ${message}`,
      options,
    );
    this.reason = reason;
  }
}

/**
 * True when `error` is any sluice error — also one of another copy of sluice loaded in the
 * same process, told by its `code` — or, given a `code`, one with that code, narrowed to its
 * class: `isSluiceError(error, 'SLUICE_INVALID_INPUT')` gives an `InvalidInputError`
 * (with its `field`), `'SLUICE_REDIS_CONFIG'` a `RedisConfigError` (with its `reason`).
 */
export function isSluiceError(
  error: unknown,
  code: 'SLUICE_INVALID_INPUT',
): error is InvalidInputError;
export function isSluiceError(error: unknown, code: 'SLUICE_TIMEOUT'): error is TimeoutError;
export function isSluiceError(
  error: unknown,
  code: 'SLUICE_UNAVAILABLE',
): error is UnavailableError;
export function isSluiceError(error: unknown, code: 'SLUICE_OVERLOAD'): error is OverloadError;
export function isSluiceError(error: unknown, code: 'SLUICE_STORE_ERROR'): error is StoreError;
export function isSluiceError(
  error: unknown,
  code: 'SLUICE_REDIS_CONFIG',
): error is RedisConfigError;
export function isSluiceError(error: unknown, code?: SluiceErrorCode): error is SluiceError;
export function isSluiceError(error: unknown, code?: SluiceErrorCode): error is SluiceError {
  if (error instanceof SluiceError) return code === undefined || error.code === code;
  // An error of another copy of sluice in the same process (a bundler's chunk, two versions in
  // node_modules) is not an instance of this copy's class: told by its code instead, so that
  // a programming mistake made there is never taken for an outage here.
  if (!(error instanceof Error)) return false;
  const found = (error as { code?: unknown }).code;
  return (
    typeof found === 'string' && SLUICE_CODES.has(found) && (code === undefined || found === code)
  );
}

const SLUICE_CODES: ReadonlySet<string> = new Set<SluiceErrorCode>([
  'SLUICE_INVALID_INPUT',
  'SLUICE_TIMEOUT',
  'SLUICE_UNAVAILABLE',
  'SLUICE_OVERLOAD',
  'SLUICE_STORE_ERROR',
  'SLUICE_REDIS_CONFIG',
]);

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'number') return `number ${String(value)}`;
  if (typeof value === 'string')
    return value.length === 0 ? 'empty string' : `string of length ${value.length}`;
  try {
    if (Array.isArray(value)) return `array of length ${String(value.length)}`;
  } catch {
    return 'an unreadable object (a revoked Proxy?)';
  }
  return typeof value;
}
