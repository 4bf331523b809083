/**
 * What `sluice inspect` and `sluice reset` share: the limits of one tenant on one route, as
 * the route's guard decides them (its override, its plan's, the route's), with the scope and
 * the Redis key of each, a limiter that reads and deletes exactly those keys, and the
 * connection they run on.
 */
import { type PolicyConfig, type RouteLimits, routeLimits } from '../config/index.js';
import { shown } from '../config/problems.js';
import { InvalidInputError } from '../errors.js';
import { type LimitScope, scopeOf } from '../http/limits.js';
import { RateLimiter } from '../limiter/rate-limiter.js';
import type { Policy, Scope } from '../types.js';
import {
  badNamespace,
  CliError,
  type Client,
  connect,
  count,
  disconnect,
  EXIT,
  NAMESPACE,
  type RedisOptions,
  redisFailure,
  redisUrl,
  usage,
} from './common.js';
import { printError } from './output.js';

/** The options that name a scope: the policy file, the route, the tenant and the user. */
export interface ScopeOptions extends RedisOptions {
  readonly config: string;
  readonly route: string;
  readonly tenant: string;
  readonly user?: string;
}

/** One limit of the route for the tenant, on its scope. */
export interface Target {
  /** Its name in headers and events. */
  readonly name: string;
  readonly policy: Policy;
  readonly per: LimitScope;
  readonly scope: Scope;
  readonly key: string;
}

/** Words for a scope: `per route`, `per tenant (every route that lists it)`. */
export function scopeWords(per: LimitScope): string {
  switch (per) {
    case 'tenant':
      return 'per tenant (shared by every route that lists it)';
    case 'user':
      return 'per user (on every route that lists it)';
    case 'route-user':
      return 'per user on this route';
    default:
      return 'per route';
  }
}

/** True for a limit counted per user: its key needs the user's id. */
export const perUser = (per: LimitScope): boolean => per === 'user' || per === 'route-user';

/**
 * Resolves the route's limits for the tenant, and each limit's scope and key. Without a
 * user, limits counted per user have no key: a usage error, unless `withoutUser` is
 * `'skip'` (they are then left out of `targets`, still in `found`).
 */
function targetsOf(
  config: PolicyConfig,
  options: { route: string; tenant: string; user?: string; namespace: string },
  limiter: RateLimiter,
  withoutUser: 'refuse' | 'skip',
): { found: RouteLimits; targets: Target[] } {
  const { route, tenant, user } = options;
  let found: RouteLimits;
  try {
    found = routeLimits(config, route, tenant);
  } catch (error) {
    if (error instanceof InvalidInputError && error.field === 'route') {
      throw new CliError(
        `the policy file has no route "${route}"`,
        EXIT.failed,
        [`Its routes: ${[...config.routes.keys()].join(', ')}`],
        { routes: [...config.routes.keys()] },
      );
    }
    if (error instanceof InvalidInputError) throw optionError(error, options);
    throw error;
  }
  const userLimits = found.limits.filter((l) => perUser(l.per));
  if (userLimits.length > 0 && user === undefined && withoutUser === 'refuse') {
    throw usage(
      `--user is needed: ${userLimits
        .map((l) => `"${found.names[found.limits.indexOf(l)]}" counts ${scopeWords(l.per)}`)
        .join(', ')}`,
    );
  }
  const targets = found.limits.flatMap((limit, i): Target[] => {
    if (user === undefined && perUser(limit.per)) return [];
    const scope = scopeOf(limit.per, tenant, route, user);
    let key: string;
    try {
      key = limiter.keyOf(scope, limit.policy);
    } catch (error) {
      if (error instanceof InvalidInputError) throw optionError(error, options);
      throw error;
    }
    return [{ name: found.names[i] as string, policy: limit.policy, per: limit.per, scope, key }];
  });
  return { found, targets };
}

/**
 * The library's refusal of `--route`, `--tenant` or `--user` (its field `tenant`,
 * `scope.user`…) as a usage error naming the option and quoting the value given.
 */
function optionError(
  error: InvalidInputError,
  options: { route: string; tenant: string; user?: string },
): CliError {
  const name = error.field.replace(/^scope\./, '');
  if (name !== 'route' && name !== 'tenant' && name !== 'user') return usage(error.message);
  const received = shown(options[name]);
  return usage(
    `--${name} must be ${error.expected}${received === '' ? '' : `; received ${received}`}`,
  );
}

/** A limiter that reads and deletes exactly what it is asked: no denial cache. */
function limiterFor(client: Client, namespace: string): RateLimiter {
  if (!NAMESPACE.test(namespace)) {
    throw badNamespace(namespace);
  }
  return new RateLimiter({
    client,
    namespace,
    denialCache: false,
    timeoutMs: 5000,
    // One line, as the command's own output; a replica still answers inspect.
    onWarning: (warning) => printError(`warning: ${warning.message}`),
  });
}

/** PTTL of each key: ms, `-1` (no TTL), `-2` (no key). */
export async function pttls(client: Client, keys: readonly string[]): Promise<number[]> {
  return Promise.all(
    keys.map(async (key) => Number(await client.client.sendCommand(['PTTL', key]))),
  );
}

export function ttlWords(pttl: number): string {
  if (pttl === -2) return 'no key (no state: a fresh quota)';
  if (pttl === -1) return 'no TTL (abnormal: the next take gives it the policy’s)';
  return `${count(pttl)} ms`;
}

export function header(found: RouteLimits, options: { cost?: number; user?: string }): string {
  const plan =
    found.plan === undefined ? 'no plan' : `plan "${found.plan}" (from ${found.planFrom})`;
  const user = options.user === undefined ? '' : `, user "${options.user}"`;
  return `${found.route} for tenant "${found.tenant}"${user}: ${plan}; limits from ${found.source}`;
}

/** A connection's limiter and the route's limits for the tenant, while a command runs. */
export interface Session {
  readonly url: string;
  readonly client: Client;
  readonly limiter: RateLimiter;
  readonly found: RouteLimits;
  readonly targets: Target[];
}

/**
 * Connects, resolves the route's limits for the tenant and runs `command` on them; the
 * connection is closed whatever happens. `withoutUser`: see `targetsOf` (`'skip'`: the
 * session's targets lack the per-user limits when no user is given).
 */
export async function withSession(
  config: PolicyConfig,
  options: ScopeOptions,
  command: (session: Session) => Promise<number>,
  withoutUser: 'refuse' | 'skip' = 'refuse',
): Promise<number> {
  const url = redisUrl(options);
  const client = await connect(url);
  try {
    const limiter = limiterFor(client, options.namespace);
    const { found, targets } = targetsOf(config, options, limiter, withoutUser);
    return await command({ url, client, limiter, found, targets });
  } finally {
    await disconnect(client);
  }
}

/** Runs Redis commands; a failure is a setup error. */
export async function onRedis<T>(url: string, commands: () => Promise<T>): Promise<T> {
  try {
    return await commands();
  } catch (error) {
    redisFailure(error, url);
  }
}
