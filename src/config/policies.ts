/**
 * Route policies from configuration (S3, S16, S21, S24): one JSON document maps route
 * templates to their policy, cost, failure mode, shadow flag and version, validated with
 * zod when loaded (once, at start). An error names the path of the bad field.
 *
 * ```json
 * {
 *   "routes": {
 *     "POST/orders": { "algorithm": "fixed-window", "limit": 10, "windowMs": 1000, "failureMode": "fail-closed" },
 *     "GET/search": { "algorithm": "token-bucket", "capacity": 20, "refillTokens": 5, "refillIntervalMs": 1000,
 *                     "failureMode": "fail-open", "failOpenLimit": 10, "shadow": true, "version": 2 }
 *   }
 * }
 * ```
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { gcra } from '../algorithms/gcra.js';
import type { Policy } from '../algorithms/policy.js';
import { slidingWindowCounter } from '../algorithms/sliding-window-counter.js';
import { slidingWindowLog } from '../algorithms/sliding-window-log.js';
import { tokenBucket } from '../algorithms/token-bucket.js';
import { InvalidInputError } from '../errors.js';
import type { FailureMode } from '../http/core.js';

const positive = z.number().int().positive();
const common = {
  name: z.string().optional(),
  version: z.union([z.number().int().nonnegative(), z.string()]).optional(),
  cost: positive.optional(),
  failureMode: z.enum(['fail-closed', 'fail-open']).optional(),
  failOpenLimit: positive.optional(),
  shadow: z.boolean().optional(),
};
const windowed = { limit: positive, windowMs: positive };

const routePolicy = z.discriminatedUnion('algorithm', [
  z.strictObject({ algorithm: z.literal('fixed-window'), ...windowed, ...common }),
  z.strictObject({ algorithm: z.literal('sliding-window-log'), ...windowed, ...common }),
  z.strictObject({ algorithm: z.literal('sliding-window-counter'), ...windowed, ...common }),
  z.strictObject({
    algorithm: z.literal('token-bucket'),
    capacity: positive,
    refillTokens: positive.optional(),
    refillIntervalMs: positive,
    ...common,
  }),
  z.strictObject({
    algorithm: z.literal('gcra'),
    limit: positive,
    periodMs: positive,
    burst: positive.optional(),
    ...common,
  }),
]);

/** A route template: a method and a path, e.g. `POST/orders/:id`. */
const ROUTE = /^[A-Z]{3,7}\/[\x21-\x7e]*$/;

const document = z.strictObject({
  routes: z.record(z.string().regex(ROUTE, 'a route template such as "POST/orders"'), routePolicy),
});

/** One route's settings, ready for an adapter's options. */
export interface RouteSettings {
  readonly route: string;
  readonly policy: Policy;
  readonly cost: number;
  readonly failureMode: FailureMode;
  readonly failOpenLimit?: number;
  readonly shadow: boolean;
}

/**
 * Validates a parsed configuration document and builds every route's policy.
 *
 * @throws {InvalidInputError} naming the path of the first bad field, e.g.
 *   `routes["POST/orders"].limit`.
 */
export function policiesFrom(config: unknown): ReadonlyMap<string, RouteSettings> {
  // Own keys are checked before zod, which would quietly drop a "__proto__" key.
  const given = (config as { routes?: unknown } | null)?.routes;
  if (typeof given === 'object' && given !== null) {
    for (const key of Object.keys(given)) {
      if (!ROUTE.test(key)) {
        throw new InvalidInputError(
          `routes[${JSON.stringify(key)}]`,
          'a route template such as "POST/orders"',
          undefined,
        );
      }
    }
  }
  const parsed = document.safeParse(config);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = (issue?.path ?? [])
      .map((p, i) =>
        i === 1 ? `[${JSON.stringify(String(p))}]` : i === 0 ? String(p) : `.${String(p)}`,
      )
      .join('');
    throw new InvalidInputError(
      path || 'config',
      issue?.message ?? 'a valid policy document',
      undefined,
    );
  }
  const routes = new Map<string, RouteSettings>();
  for (const [route, r] of Object.entries(parsed.data.routes)) {
    const field = `routes[${JSON.stringify(route)}]`;
    let policy: Policy;
    try {
      policy = build(r);
    } catch (error) {
      if (error instanceof InvalidInputError) {
        throw new InvalidInputError(
          `${field}.${error.field.replace(/^policy\./, '')}`,
          error.expected,
          undefined,
        );
      }
      throw error;
    }
    if (r.failureMode === 'fail-open' && r.failOpenLimit === undefined) {
      throw new InvalidInputError(
        `${field}.failOpenLimit`,
        'a positive integer with "fail-open"',
        undefined,
      );
    }
    routes.set(route, {
      route,
      policy,
      cost: r.cost ?? 1,
      failureMode: r.failureMode ?? 'fail-closed',
      ...(r.failOpenLimit === undefined ? {} : { failOpenLimit: r.failOpenLimit }),
      shadow: r.shadow ?? false,
    });
  }
  return routes;
}

/** Reads and validates a JSON policy file (once, at start). @throws {InvalidInputError} */
export function loadPolicies(path: string | URL): ReadonlyMap<string, RouteSettings> {
  let config: unknown;
  try {
    config = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    const invalid = new InvalidInputError(
      'config',
      `a readable JSON file (${String(path)})`,
      undefined,
    );
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
  return policiesFrom(config);
}

function build(r: z.infer<typeof routePolicy>): Policy {
  const identity = { name: r.name, version: r.version };
  switch (r.algorithm) {
    case 'fixed-window':
      return fixedWindow({ limit: r.limit, windowMs: r.windowMs, ...identity });
    case 'sliding-window-log':
      return slidingWindowLog({ limit: r.limit, windowMs: r.windowMs, ...identity });
    case 'sliding-window-counter':
      return slidingWindowCounter({ limit: r.limit, windowMs: r.windowMs, ...identity });
    case 'token-bucket':
      return tokenBucket({
        capacity: r.capacity,
        refillTokens: r.refillTokens,
        refillIntervalMs: r.refillIntervalMs,
        ...identity,
      });
    case 'gcra':
      return gcra({ limit: r.limit, periodMs: r.periodMs, burst: r.burst, ...identity });
  }
}
