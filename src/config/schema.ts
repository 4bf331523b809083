/**
 * The policy document, format 2, as zod schemas and patterns: the leaves of the document
 * (an inline policy, a route object, a scoped limit, a tenant, the top-level object) and
 * the patterns of route templates and names.
 *
 * Maps (`policies`, `routes`, `plans`, `tenants`) and the unions of a route's value are
 * walked by hand in the compiler rather than described here, so that each error names its
 * exact path and `"__proto__"` keys are never dropped silently.
 */
import { z } from 'zod';

const positive = z
  .number({ error: 'a positive integer' })
  .int({ error: 'a positive integer' })
  .positive({ error: 'a positive integer' });

/** What a policy's `version` must be, in the words of the builders. */
const VERSION = 'a non-negative safe integer or 1–64 characters of [A-Za-z0-9._-]';

/** The optional identity of an inline policy. */
export const identity = {
  name: z.string({ error: 'a string of 1–64 characters of [A-Za-z0-9._:/-]' }).optional(),
  // Each member carries the message too: a union reports the issues of the one member whose
  // type matches (a negative number: the number's), in zod's words otherwise.
  version: z
    .union(
      [
        z.number({ error: VERSION }).int({ error: VERSION }).nonnegative({ error: VERSION }),
        z.string({ error: VERSION }),
      ],
      { error: VERSION },
    )
    .optional(),
};

/** A route's settings besides its limits. */
export const routeSettings = {
  cost: positive.optional(),
  failureMode: z
    .enum(['fail-closed', 'fail-open'], { error: '"fail-closed" or "fail-open"' })
    .optional(),
  failOpenLimit: positive.optional(),
  shadow: z.boolean({ error: 'true or false' }).optional(),
};

const SCOPES = ['route', 'tenant', 'user', 'route-user'] as const;
const per = z.enum(SCOPES, { error: 'one of "route", "tenant", "user", "route-user"' });

/**
 * Blocks, on every rate policy (not `concurrency`): `blockMs` and its `escalate` form, as
 * the builders take them; the builders check the ranges (factor 2–1,000, `maxMs` at least
 * `blockMs`, `escalate` only with `blockMs`), their errors named at the file's path.
 */
const BLOCKS = {
  blockMs: positive.optional(),
  escalate: z
    .strictObject(
      { factor: positive, maxMs: positive, withinMs: positive },
      { error: 'an object { "factor", "maxMs", "withinMs" }' },
    )
    .optional(),
};

/** Each algorithm's parameters. */
const PARAMETERS = {
  'fixed-window': { limit: positive, windowMs: positive, ...BLOCKS },
  'sliding-window-log': { limit: positive, windowMs: positive, ...BLOCKS },
  'sliding-window-counter': { limit: positive, windowMs: positive, ...BLOCKS },
  'token-bucket': {
    capacity: positive,
    refillTokens: positive.optional(),
    refillIntervalMs: positive,
    ...BLOCKS,
  },
  gcra: { limit: positive, periodMs: positive, burst: positive.optional(), ...BLOCKS },
  concurrency: { limit: positive, leaseMs: positive },
} as const;
type Algorithm = keyof typeof PARAMETERS;

/** The algorithms a policy may name, in the order errors list them. */
export const ALGORITHMS = Object.keys(PARAMETERS) as Algorithm[];

/** An inline policy `{ algorithm, …parameters }` with the fields of `extra`, strictly. */
export function inlinePolicy<S extends z.ZodRawShape>(extra: S) {
  const error = { error: 'an inline policy: an object { "algorithm", … }' };
  return z.discriminatedUnion(
    'algorithm',
    [
      z.strictObject({
        algorithm: z.literal('fixed-window'),
        ...PARAMETERS['fixed-window'],
        ...extra,
      }),
      z.strictObject({
        algorithm: z.literal('sliding-window-log'),
        ...PARAMETERS['sliding-window-log'],
        ...extra,
      }),
      z.strictObject({
        algorithm: z.literal('sliding-window-counter'),
        ...PARAMETERS['sliding-window-counter'],
        ...extra,
      }),
      z.strictObject({
        algorithm: z.literal('token-bucket'),
        ...PARAMETERS['token-bucket'],
        ...extra,
      }),
      z.strictObject({ algorithm: z.literal('gcra'), ...PARAMETERS.gcra, ...extra }),
      z.strictObject({
        algorithm: z.literal('concurrency'),
        ...PARAMETERS.concurrency,
        ...extra,
      }),
    ],
    error,
  );
}

/** An inline policy (in a route, a plan, a tenant override, or the `policies` map). */
export const definition = inlinePolicy(identity);
export type Definition = z.infer<typeof definition>;

/** A route as an object with settings: `{ policy?, per?, cost?, failureMode?, … }`. */
export const routeObject = z.strictObject(
  { policy: z.unknown().optional(), per: per.optional(), ...routeSettings },
  { error: 'a route object { "policy", "per"?, "cost"?, "failureMode"?, … }' },
);

/** `{ policy, per }`. */
export const scopedLimit = z.strictObject(
  { policy: z.unknown().optional(), per: per.optional() },
  { error: 'an object { "policy", "per" }' },
);

/** A tenant: `{ plan?, routes? }`. */
export const tenantObject = z.strictObject(
  { plan: z.string({ error: 'the name of a plan' }).optional(), routes: z.unknown().optional() },
  { error: 'an object { "plan"?, "routes"? }' },
);

/** The document's top-level fields. */
export const documentObject = z.strictObject(
  {
    policies: z.unknown().optional(),
    routes: z.unknown().optional(),
    plans: z.unknown().optional(),
    defaultPlan: z.string({ error: 'the name of a plan' }).optional(),
    tenants: z.unknown().optional(),
  },
  { error: 'a JSON object with "routes"' },
);

/**
 * A route template: a method and a path, e.g. `POST/orders/:id`, in printable ASCII without
 * spaces; neither a query (`?`) nor a fragment (`#`): a template never has them, a raw URL
 * may. Keys of `routes` and of each plan are checked with it; a tenant's route must be one
 * of those.
 */
export const ROUTE = /^[A-Z]{3,7}\/[\x21\x22\x24-\x3e\x40-\x7e]*$/;
export const ROUTE_EXPECTED =
  'a route template such as "POST/orders" (a method, then the path, no query or fragment)';

/** Policy and plan names. */
export const NAME = /^[A-Za-z0-9._:/-]{1,64}$/;
