/**
 * The guard's options, checked once when the guard is made: every `InvalidInputError` of
 * construction is thrown here, and what the request steps read is one normalised, frozen
 * {@link GuardConfig}. The checks run in a fixed order, so the first wrong option of several
 * is the one reported.
 */
import { isConcurrency } from '../../algorithms/concurrency.js';
import { isPolicy, MAX_WINDOW_MS } from '../../algorithms/policy.js';
import { InvalidInputError } from '../../errors.js';
import { requireSettle } from '../../limiter/priced.js';
import type { RateLimiter } from '../../limiter/rate-limiter.js';
import type { Metrics } from '../../metrics/types.js';
import type { Policy } from '../../types.js';
import { optionalPositiveInteger, positiveSafeInteger, rejectUnknownKeys } from '../../validate.js';
import type { HeaderOptions } from '../core.js';
import { limitNames, needsUser, type ResolvedLimit, resolveLimits } from '../limits.js';
import { LocalWindow } from '../local-window.js';
import type { SettleOption } from './settle.js';
import type { GuardOptions, HttpOutcomeEvent, ResponseHooks } from './types.js';

/** The option names `createGuard` knows; any other is a misspelling and refused. */
export const GUARD_OPTION_KEYS: readonly string[] = [
  'limiter',
  'policy',
  'route',
  'identify',
  'user',
  'skip',
  'cost',
  'failureMode',
  'failOpenLimit',
  'failOpenWindowMs',
  'onOutcome',
  'shadow',
  'shadowHeader',
  'headers',
  'responses',
  'wwwAuthenticate',
  'metrics',
  'requestId',
  'settle',
  'retryId',
];

/**
 * A guard's options after their checks, with the defaults filled in. The functions are the
 * application's own: the request steps call them as plain functions (never as methods of
 * this object). `hooks`, `headers` and `metrics` are the objects the application passed,
 * not copies.
 */
export interface GuardConfig<Req> {
  readonly limiter: RateLimiter;
  /** A non-empty route template, or a function whose answer is checked on every request. */
  readonly route: string | ((req: Req) => string);
  readonly identify: (req: Req) => string | undefined | Promise<string | undefined>;
  readonly user: ((req: Req) => string | undefined | Promise<string | undefined>) | undefined;
  readonly skip: ((req: Req) => boolean | Promise<boolean>) | undefined;
  /** Fixed limits, checked once; `undefined` when `plan` chooses them per request. */
  readonly fixedLimits: readonly ResolvedLimit[] | undefined;
  /** The `policy` function, whose answer is checked on every request; else `undefined`. */
  readonly plan: ((req: Req, tenant: string) => unknown) | undefined;
  /** A positive safe integer, or a function of the request (its answer checked by the limiter). */
  readonly cost: number | ((req: Req) => number);
  /** The local fallback limit: present exactly when the route is `"fail-open"`. */
  readonly fallback: LocalWindow | undefined;
  readonly shadow: boolean;
  readonly shadowHeader: string | undefined;
  /** The `WWW-Authenticate` challenge of the `401`. */
  readonly challenge: string;
  readonly hooks: ResponseHooks<Req>;
  /** The RateLimit fields' options, or `false` for none. */
  readonly headers: HeaderOptions | false;
  readonly metrics: Pick<Metrics, 'request'> | undefined;
  readonly onOutcome: ((event: HttpOutcomeEvent) => void) | undefined;
  readonly requestId: ((req: Req) => string | undefined) | undefined;
  readonly settle: SettleOption<Req> | undefined;
  readonly retryId: ((req: Req) => string | undefined) | undefined;
}

/** A printable header value: no control characters (so no CR/LF injection). */
const HEADER_VALUE = /^[\x20-\x7e]{1,256}$/;

/**
 * Checks a guard's options (see `createGuard` for what each may be) and returns them
 * normalised and frozen.
 *
 * @throws {InvalidInputError} naming the first option that is unknown, missing or invalid.
 */
export function guardConfig<Req>(options: GuardOptions<Req>): GuardConfig<Req> {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidInputError('options', 'an object', options);
  }
  rejectUnknownKeys(options, GUARD_OPTION_KEYS, 'options');
  const { limiter, identify, onOutcome, skip, route } = options;
  if (typeof limiter?.take !== 'function') {
    throw new InvalidInputError('limiter', 'a RateLimiter', limiter);
  }
  if (typeof route !== 'function' && (typeof route !== 'string' || route.length === 0)) {
    throw new InvalidInputError(
      'route',
      'a non-empty route template such as "POST/orders", or a function of the request',
      route,
    );
  }
  if (typeof identify !== 'function') {
    throw new InvalidInputError('identify', 'a function', identify);
  }
  for (const name of ['user', 'skip', 'onOutcome', 'requestId', 'settle', 'retryId'] as const) {
    const hook = options[name];
    if (hook !== undefined && typeof hook !== 'function') {
      throw new InvalidInputError(name, 'a function', hook);
    }
  }
  const user = options.user;
  const policy = options.policy;
  const fixedLimits = typeof policy === 'function' ? undefined : checkFixedLimits(policy, user);
  if (options.settle !== undefined && fixedLimits !== undefined) {
    checkSettleLimits(policy, fixedLimits);
  }
  const cost = options.cost ?? 1;
  if (typeof cost !== 'function') positiveSafeInteger('cost', cost);
  const fallback = checkFailureMode(options, fixedLimits);
  if (options.shadow !== undefined && typeof options.shadow !== 'boolean') {
    throw new InvalidInputError('shadow', 'true or false', options.shadow);
  }
  const shadowHeader = checkShadowHeader(options.shadowHeader);
  const challenge = options.wwwAuthenticate ?? 'Bearer';
  if (typeof challenge !== 'string' || !HEADER_VALUE.test(challenge)) {
    throw new InvalidInputError(
      'wwwAuthenticate',
      'a challenge of 1–256 printable ASCII characters, e.g. \'Bearer realm="api"\'',
      challenge,
    );
  }
  const hooks = checkHooks(options.responses ?? {});
  const headers = checkHeaderOptions(options.headers);
  const metrics = options.metrics;
  if (metrics !== undefined && typeof metrics?.request !== 'function') {
    throw new InvalidInputError('metrics', 'a Metrics (with request)', metrics);
  }
  return Object.freeze({
    limiter,
    route,
    identify,
    user,
    skip,
    fixedLimits,
    plan: typeof policy === 'function' ? policy : undefined,
    cost,
    fallback,
    shadow: options.shadow === true,
    shadowHeader,
    challenge,
    hooks,
    headers,
    metrics,
    onOutcome,
    requestId: options.requestId,
    settle: options.settle,
    retryId: options.retryId,
  });
}

/** Fixed limits, checked once (a plan function's answer is checked on every request). */
function checkFixedLimits(policy: unknown, user: unknown): readonly ResolvedLimit[] {
  const limits = resolveLimits(policy, 'policy');
  // Names collide whatever the route is called: check them once, here.
  limitNames(limits, '', 'policy');
  if (needsUser(limits) && user === undefined) {
    throw new InvalidInputError(
      'user',
      'a function of the request, for limits with per "user" or "route-user"',
      undefined,
    );
  }
  return limits;
}

/**
 * With `settle`, fixed limits the guard can reserve: a sliding window log's limit within
 * `MAX_PRICED_LOG_LIMIT` (its settle rewrites up to `limit` members). Checked here, so a
 * route that could never be settled fails when its guard is made, not on its first request.
 * One concurrency limit alone is acquired as a lease, not reserved, and is left as it is.
 *
 * @throws {InvalidInputError} naming the policy's `limit`: `policy.limit` (`policy.policy.limit`
 *   for a `{ policy, per }`), or `policy[i].limit` / `policy[i].policy.limit` in a list.
 */
function checkSettleLimits(policy: unknown, limits: readonly ResolvedLimit[]): void {
  if (limits.length === 1 && isConcurrency((limits[0] as ResolvedLimit).policy)) return;
  for (let i = 0; i < limits.length; i++) {
    // The path resolveLimits names: a policy, or the `policy` of a `{ policy, per }`.
    const given: unknown = Array.isArray(policy) ? policy[i] : policy;
    const at = Array.isArray(policy) ? `policy[${i}]` : 'policy';
    checkSettleLimit((limits[i] as ResolvedLimit).policy, isPolicy(given) ? at : `${at}.policy`);
  }
}

/**
 * One fixed limit of a guard with `settle` (see {@link checkSettleLimits}): the limiter's own
 * check of what `reserve` accepts, run when the guard is made. A concurrency limit in a stack is
 * left to the limiter's `reserveAll`, as before.
 */
function checkSettleLimit(policy: Policy, field: string): void {
  if (!isConcurrency(policy)) requireSettle(policy, field);
}

/** `failureMode`, and with `"fail-open"` the local fallback limit it needs. */
function checkFailureMode(
  options: Pick<GuardOptions<unknown>, 'failureMode' | 'failOpenLimit' | 'failOpenWindowMs'>,
  fixedLimits: readonly ResolvedLimit[] | undefined,
): LocalWindow | undefined {
  const failureMode = options.failureMode ?? 'fail-closed';
  if (failureMode !== 'fail-closed' && failureMode !== 'fail-open') {
    throw new InvalidInputError('failureMode', '"fail-closed" or "fail-open"', failureMode);
  }
  if (failureMode === 'fail-closed') return undefined;
  const limit = options.failOpenLimit;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) {
    throw new InvalidInputError('failOpenLimit', 'a positive safe integer with "fail-open"', limit);
  }
  const first = fixedLimits?.[0]?.policy as { windowMs?: number } | undefined;
  const windowMs = optionalPositiveInteger(
    'failOpenWindowMs',
    options.failOpenWindowMs,
    first?.windowMs ?? 1000,
    MAX_WINDOW_MS,
  );
  return new LocalWindow(limit, windowMs);
}

/** `shadowHeader`: unset, or a header name of 1–64 letters, digits or hyphens. */
function checkShadowHeader(value: unknown): string | undefined {
  if (value !== undefined && (typeof value !== 'string' || !/^[A-Za-z0-9-]{1,64}$/.test(value))) {
    throw new InvalidInputError(
      'shadowHeader',
      'a header name of 1–64 letters, digits or hyphens',
      value,
    );
  }
  return value as string | undefined;
}

/** `responses`: an object of the hooks `limited`, `unavailable`, `unidentified`. */
function checkHooks<Req>(hooks: ResponseHooks<Req>): ResponseHooks<Req> {
  if (typeof hooks !== 'object' || hooks === null) {
    throw new InvalidInputError('responses', 'an object of hooks', hooks);
  }
  rejectUnknownKeys(hooks, ['limited', 'unavailable', 'unidentified'], 'responses');
  for (const name of ['limited', 'unavailable', 'unidentified'] as const) {
    if (hooks[name] !== undefined && typeof hooks[name] !== 'function') {
      throw new InvalidInputError(`responses.${name}`, 'a function', hooks[name]);
    }
  }
  return hooks;
}

/** The `headers` option: `false`, or `{ standard?, legacy? }` with boolean values. */
function checkHeaderOptions(value: unknown): HeaderOptions | false {
  if (value === undefined) return {};
  if (value === false) return false;
  if (typeof value !== 'object' || value === null) {
    throw new InvalidInputError('headers', 'false or { standard?, legacy? }', value);
  }
  rejectUnknownKeys(value, ['standard', 'legacy'], 'headers');
  for (const key of ['standard', 'legacy'] as const) {
    const flag = (value as HeaderOptions)[key];
    if (flag !== undefined && typeof flag !== 'boolean') {
      throw new InvalidInputError(`headers.${key}`, 'true or false', flag);
    }
  }
  return value as HeaderOptions;
}
