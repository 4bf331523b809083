/**
 * The guard's public types: its options, its verdict, its outcomes and the contexts of its
 * response hooks. Types only, so that adapters and metrics sinks can name them without
 * loading the guard's code.
 */

import type { RateLimiter } from '../../limiter/rate-limiter.js';
import type { HttpOutcome, Metrics } from '../../metrics/types.js';
import type { Decision } from '../../types.js';
import type { FailureMode, HeaderOptions, HttpResponseSpec } from '../core.js';
import type { LimitsOption } from '../limits.js';
import type { SettleOption, VerdictSettle } from './settle.js';

export type { HttpOutcome };

/** One outcome, for logs and metrics. Carries no tenant id: log it only where allowed. */
export interface HttpOutcomeEvent {
  readonly outcome: HttpOutcome;
  /** The route template that names the quota. */
  readonly route: string;
  /**
   * The policy's name (see `Policy.name`): on `limited`, the policy that bound (the longest
   * wait); otherwise the route's first policy. Empty when the policies were not known yet
   * (`skipped`, or `unidentified` before a plan was chosen).
   */
  readonly policy: string;
  /** Every policy the request met, in order (empty when not known yet). */
  readonly policies: readonly string[];
  /** The decision of `policy`, for `allowed` and `limited`. */
  readonly decision?: Decision;
  /** Every policy's decision, in the order of `policies`, for `allowed` and `limited`. */
  readonly decisions?: readonly Decision[];
  /** The limiter's error, for the failure outcomes. */
  readonly error?: unknown;
  /** True on a shadow (record-only) route: the request went through whatever the outcome. */
  readonly shadow?: boolean;
}

/**
 * A change to a refusal the guard makes: `body` replaces the body; `headers` are added
 * (`content-type` among them, to match a new body). The status, `Retry-After` and the
 * RateLimit fields stay the guard's.
 */
export interface ResponseChange {
  readonly body?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** What a `responses.limited` hook gets. */
export interface LimitedResponseContext<Req> {
  readonly req: Req;
  readonly route: string;
  /** `Retry-After` in seconds, or `undefined` when no wait helps (a cost that never fits). */
  readonly retryAfterSeconds: number | undefined;
  /** The names of the policies that refused. */
  readonly violatedPolicies: readonly string[];
  /** Every policy's decision, in the route's order. */
  readonly decisions: readonly Decision[];
  /** The guard's own `429`. */
  readonly response: HttpResponseSpec;
}

/** What a `responses.unavailable` hook gets. */
export interface UnavailableResponseContext<Req> {
  readonly req: Req;
  readonly route: string;
  /** The limiter's error. */
  readonly error: unknown;
  /** The guard's own `503`. */
  readonly response: HttpResponseSpec;
}

/** What a `responses.unidentified` hook gets. */
export interface UnidentifiedResponseContext<Req> {
  readonly req: Req;
  readonly route: string;
  /** The guard's own `401`. */
  readonly response: HttpResponseSpec;
}

/**
 * Hooks that shape the refusals (e.g. your API's error format). Each returns a
 * {@link ResponseChange}, or `undefined` for the guard's own response (RFC 9457 problem
 * details). A hook that throws is reported as a process warning and the guard's own response
 * is sent: the refusal itself never changes.
 */
export interface ResponseHooks<Req> {
  readonly limited?: (context: LimitedResponseContext<Req>) => ResponseChange | undefined;
  readonly unavailable?: (context: UnavailableResponseContext<Req>) => ResponseChange | undefined;
  readonly unidentified?: (context: UnidentifiedResponseContext<Req>) => ResponseChange | undefined;
}

/** Options of a route's guard, for a framework's request type `Req`. */
export interface GuardOptions<Req> {
  readonly limiter: RateLimiter;
  /**
   * The route's server-side limits: a policy; an array of them (stacked limits,
   * decided at once with `takeAll`: all or nothing); `{ policy, per }` for a limit on the
   * whole tenant or one user (see `LimitScope`); or a function `(req, tenant) => …` of
   * those, for plans and per-tenant overrides, checked on every request.
   */
  readonly policy: LimitsOption<Req>;
  /**
   * The route template that names the quota, e.g. `"POST/orders"` — never the raw URL:
   * a string, or a function of the request that returns the framework's route
   * template (as the Express adapter does). Every adapter lets a `route` given here name
   * the quota over its own template (Express and Fastify derive one only when it is absent),
   * so a policy file's settings name the file's route wherever they are mounted.
   */
  readonly route: string | ((req: Req) => string);
  /**
   * The verified tenant of the request, from the authenticated session, or
   * `undefined` when there is none (answered `401`). Never a header or field the client
   * writes. May be async. To limit anonymous requests instead of refusing them, return a
   * fixed tenant for them (one shared quota) or the client address (`clientAddressOf`).
   */
  readonly identify: (req: Req) => string | undefined | Promise<string | undefined>;
  /**
   * The verified user of the request inside its tenant, for limits with `per: "user"` or
   * `"route-user"`; `undefined` (no user) is answered `401` on those routes. May be async.
   */
  readonly user?: (req: Req) => string | undefined | Promise<string | undefined>;
  /**
   * Requests that pass without a decision (health checks, internal callers): counted as
   * `skipped`, nothing spent, no headers. Called first, before `identify`. May be async.
   */
  readonly skip?: (req: Req) => boolean | Promise<boolean>;
  /** Units this request costs, on every limit: a number or a function of the request. Default 1. */
  readonly cost?: number | ((req: Req) => number);
  /**
   * When the limiter fails: `"fail-closed"` (default) answers `503` + `Retry-After: 1`;
   * `"fail-open"` admits within `failOpenLimit`.
   */
  readonly failureMode?: FailureMode;
  /**
   * Required with `"fail-open"`: units per tenant per route per window that this replica
   * admits on its own while the limiter fails (a positive safe integer). Over it: `503`.
   */
  readonly failOpenLimit?: number;
  /**
   * Window of the local fallback in ms: an integer from 1 to 315,360,000,000. Default: the
   * `windowMs` of the route's first policy when `policy` is fixed and has one, else 1000.
   */
  readonly failOpenWindowMs?: number;
  /**
   * Called once per request with its outcome. An error it throws is reported as a process
   * warning and never changes the response.
   */
  readonly onOutcome?: (event: HttpOutcomeEvent) => void;
  /**
   * Shadow (record-only) mode: decide, count and report every outcome as usual, but
   * never block — the handler runs even when the request would have been limited or the
   * limiter failed. For trying a policy on live traffic before enforcing it; roll out by
   * turning this off. A request without a verified identity is still answered `401`.
   * Default `false`.
   */
  readonly shadow?: boolean;
  /**
   * With `shadow`, the name of a response header that carries the decision the route would
   * have taken: `allowed`, `limited` or `unavailable` (e.g. `"x-ratelimit-shadow"`). Unset:
   * no header.
   */
  readonly shadowHeader?: string;
  /**
   * Rate-limit headers on decided responses (admitted and `429`): `HeaderOptions`, or
   * `false` for none. Default: the IETF `RateLimit-Policy` / `RateLimit` fields, one list
   * item per policy. Never sent when the limiter failed (no invented values) nor in shadow
   * mode.
   */
  readonly headers?: HeaderOptions | false;
  /** Hooks that shape the `429`, `503` and `401` bodies (see {@link ResponseHooks}). */
  readonly responses?: ResponseHooks<Req>;
  /**
   * A metrics sink (see `Metrics`, e.g. `prometheusMetrics()`) that counts each request's
   * outcome by route (`sluice_http_requests_total`). Give the limiter the same sink for the
   * decisions themselves.
   */
  readonly metrics?: Pick<Metrics, 'request'>;
  /**
   * The request's id (e.g. from an `X-Request-Id` your edge sets, or your logger's), passed
   * to the limiter so that decision events (`onDecision`) carry it. May return `undefined`.
   */
  readonly requestId?: (req: Req) => string | undefined;
  /**
   * The `WWW-Authenticate` challenge of the `401` (RFC 9110 §11.6.1), e.g.
   * `'Bearer realm="api"'`. Default `"Bearer"`.
   */
  readonly wwwAuthenticate?: string;
  /**
   * Costs known when the response ends: the guard reserves the route's cost on every limit
   * before the handler and, once the handler ends its response, settles each with this
   * function's answer — the actual cost, a non-negative safe integer (0 gives all back). Its
   * third argument says `{ aborted }`: whether the client disconnected before the response
   * was sent in full (the status is still the handler's). A response never ended after its
   * connection closed is never settled: the reservation stays consumed. For a login route that counts only failures: `settle: (req, res) =>
   * (res.statusCode < 400 ? 0 : 1)`, exact under concurrency (at most the limit of attempts
   * in flight or failed). A throw or a bad answer leaves the cost consumed. Stacked limits
   * are reserved all or nothing in one atomic call (`limiter.reserveAll`) and each settled.
   * A sliding window log is reserved only up to a limit of `MAX_PRICED_LOG_LIMIT` (500): a
   * fixed log limit above it throws an `InvalidInputError` when the guard is made (a
   * `policy` function's answer, when the request is). See `docs/priced.md`.
   */
  readonly settle?: SettleOption<Req>;
  /**
   * The request's idempotency key, e.g. `(req) => req.headers['idempotency-key']`: makes the
   * guard's take (or takeAll, or reserve) retry-safe — a retried request with the same key
   * within the policies' horizon replays the first decision and consumes nothing (see
   * `TakeOptions.id`), and the handler runs once per key: a request with a key that was
   * already admitted and handed to the handler (`RateLimiter.claimServe`) is answered `409`
   * (outcome `duplicate`), whether that first request is still running or done; no response
   * is stored. Off by default. An answer that is not a string of 1–128 characters (a promise
   * too: this function is synchronous), or a throw, is no key (never a failure). Only for keys a client cannot use to replay another tenant's
   * decision: the key is scoped to the tenant, route and user the guard identified.
   */
  readonly retryId?: (req: Req) => string | undefined;
}

/**
 * What one route may set over the options an adapter shares between its routes (Fastify's
 * `config.rateLimit`, NestJS's `@RateLimit()`): its `policy` (required), and overrides. A
 * `route` here names the quota instead of the framework's route template.
 */
export type RouteLimitSettings<Req> = Pick<GuardOptions<Req>, 'policy'> &
  Partial<
    Pick<
      GuardOptions<Req>,
      | 'route'
      | 'cost'
      | 'failureMode'
      | 'failOpenLimit'
      | 'failOpenWindowMs'
      | 'shadow'
      | 'shadowHeader'
      | 'skip'
      | 'user'
      | 'headers'
      | 'responses'
      | 'wwwAuthenticate'
      | 'onOutcome'
    >
  >;

/** What the guard decided for one request. */
export type GuardVerdict =
  /**
   * Run the handler; add `headers` to its response (the shadow header, when set). With the
   * `settle` option, call `settle(res, { aborted })` once when the handler ended the response
   * (every adapter does; never on a connection close alone: the status is not final then).
   */
  | {
      readonly pass: true;
      readonly headers: Readonly<Record<string, string>>;
      /**
       * Present when the request holds leases (a `concurrency` limit): call it once the
       * handler's response ended (more calls do nothing). The leases are renewed until then
       * or until `abandon()`; uncalled, they expire `leaseMs` after their last renewal.
       */
      readonly release?: () => void;
      /**
       * Present with `release`: stops renewing the leases, which then expire `leaseMs` after
       * their last renewal unless released sooner. The adapters call it when the connection
       * closes before the response ended (the handler may still be running).
       */
      readonly abandon?: () => void;
      readonly settle?: VerdictSettle;
    }
  /** Answer `response` now; the handler must not run. */
  | { readonly pass: false; readonly response: HttpResponseSpec };

/** A route's guard: `(req) => Promise<GuardVerdict>`, with its outcome counts. */
export type Guard<Req> = ((req: Req) => Promise<GuardVerdict>) & {
  /** Counts of outcomes since the guard was made. */
  readonly counts: Readonly<Record<HttpOutcome, number>>;
};
