/**
 * `sluice inspect` and `sluice reset`: the limits of one tenant on one route, as the route's
 * guard decides them (its override, its plan's, the route's), with the scope and the Redis
 * key of each — what a take would decide (`peek`, consuming nothing) and each key's PTTL;
 * and deleting exactly those keys (`reset`), after a confirmation.
 */
import { createInterface } from 'node:readline/promises';
import {
  describePolicy,
  type PolicyConfig,
  type RouteLimits,
  routeLimits,
} from '../config/index.js';
import { InvalidInputError } from '../errors.js';
import { type LimitScope, scopeOf } from '../http/limits.js';
import { RateLimiter } from '../limiter/rate-limiter.js';
import type { Decision, Policy, Scope } from '../types.js';
import {
  CliError,
  type Client,
  connect,
  count,
  disconnect,
  duration,
  EXIT,
  NAMESPACE,
  type RedisOptions,
  readConfig,
  redacted,
  redisFailure,
  redisUrl,
  usage,
} from './common.js';

/** Options of `sluice inspect`. */
export interface InspectOptions extends RedisOptions {
  readonly config: string;
  readonly route: string;
  readonly tenant: string;
  readonly user?: string;
  readonly cost?: number;
}

/** Options of `sluice reset`. */
export interface ResetOptions extends RedisOptions {
  readonly config: string;
  readonly route: string;
  readonly tenant: string;
  readonly user?: string;
  readonly policy?: string[];
  readonly yes?: boolean;
}

/** One limit of the route for the tenant, on its scope. */
interface Target {
  /** Its name in headers and events. */
  readonly name: string;
  readonly policy: Policy;
  readonly per: LimitScope;
  readonly scope: Scope;
  readonly key: string;
}

/** Words for a scope: `per route`, `per tenant (every route that lists it)`. */
function scopeWords(per: LimitScope): string {
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

/** Resolves the route's limits for the tenant, and each limit's scope and key. */
function targetsOf(
  config: PolicyConfig,
  options: { route: string; tenant: string; user?: string; namespace: string },
  limiter: RateLimiter,
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
    if (error instanceof InvalidInputError) throw usage(`--${error.field}: ${error.message}`);
    throw error;
  }
  const perUser = found.limits.filter((l) => l.per === 'user' || l.per === 'route-user');
  if (perUser.length > 0 && user === undefined) {
    throw usage(
      `--user is needed: ${perUser
        .map((l) => `"${found.names[found.limits.indexOf(l)]}" counts ${scopeWords(l.per)}`)
        .join(', ')}`,
    );
  }
  const targets = found.limits.map((limit, i) => {
    const scope = scopeOf(limit.per, tenant, route, user);
    let key: string;
    try {
      key = limiter.keyOf(scope, limit.policy);
    } catch (error) {
      if (error instanceof InvalidInputError) throw usage(error.message.replace(/^scope\./, '--'));
      throw error;
    }
    return { name: found.names[i] as string, policy: limit.policy, per: limit.per, scope, key };
  });
  return { found, targets };
}

/** A limiter that reads and deletes exactly what it is asked: no denial cache. */
function limiterFor(client: Client, namespace: string): RateLimiter {
  if (!NAMESPACE.test(namespace)) {
    throw usage(`--namespace must be 1–64 characters of [A-Za-z0-9._:-], not "${namespace}"`);
  }
  return new RateLimiter({
    client,
    namespace,
    denialCache: false,
    timeoutMs: 5000,
    // One line, as the command's own output; a replica still answers inspect.
    onWarning: (warning) => console.error(`warning: ${warning.message}`),
  });
}

/** PTTL of each key: ms, `-1` (no TTL), `-2` (no key). */
async function pttls(client: Client, keys: readonly string[]): Promise<number[]> {
  return Promise.all(
    keys.map(async (key) => Number(await client.client.sendCommand(['PTTL', key]))),
  );
}

function ttlWords(pttl: number): string {
  if (pttl === -2) return 'no key (no state: a fresh quota)';
  if (pttl === -1) return 'no TTL (abnormal: the next take gives it the policy’s)';
  return `${count(pttl)} ms`;
}

function decisionWords(d: Decision, cost: number): string {
  if (d.allowed) {
    const reset = d.resetMs > 0 ? `, clean again in ${duration(d.resetMs)}` : '';
    return `allowed, ${count(d.remaining)} of ${count(d.limit)} left after it${reset}`;
  }
  if (!Number.isFinite(d.retryAfterMs)) {
    return `refused: a cost of ${cost} is more than this policy can ever admit`;
  }
  return `refused, ${count(d.remaining)} of ${count(d.limit)} left, retry in ${duration(d.retryAfterMs)}`;
}

function header(found: RouteLimits, options: { cost?: number; user?: string }): string {
  const plan =
    found.plan === undefined ? 'no plan' : `plan "${found.plan}" (from ${found.planFrom})`;
  const user = options.user === undefined ? '' : `, user "${options.user}"`;
  return `${found.route} for tenant "${found.tenant}"${user}: ${plan}; limits from ${found.source}`;
}

/** `sluice inspect`: what a take would decide for each limit, its key and PTTL. */
export async function inspect(options: InspectOptions): Promise<number> {
  const config = await readConfig(options.config);
  const url = redisUrl(options);
  const client = await connect(url);
  try {
    const limiter = limiterFor(client, options.namespace);
    const { found, targets } = targetsOf(config, options, limiter);
    const cost = options.cost ?? found.settings.cost;
    let decisions: Decision[];
    let ttls: number[];
    try {
      // Peeks write nothing (not even a repair); PTTL only reads.
      decisions = await Promise.all(targets.map((t) => limiter.peek(t.scope, t.policy, { cost })));
      ttls = await pttls(
        client,
        targets.map((t) => t.key),
      );
    } catch (error) {
      redisFailure(error, url);
    }
    const allowed = decisions.every((d) => d.allowed);
    if (options.json) {
      console.log(
        JSON.stringify(
          {
            ok: true,
            route: found.route,
            tenant: found.tenant,
            user: options.user ?? null,
            plan: found.plan ?? null,
            planFrom: found.planFrom ?? null,
            source: found.source,
            namespace: options.namespace,
            cost,
            allowed,
            limits: targets.map((t, i) => ({
              name: t.name,
              policy: t.policy.name,
              algorithm: t.policy.algorithm,
              limit: t.policy.limit,
              windowMs: t.policy.quotaWindowMs,
              per: t.per,
              scope: t.scope,
              key: t.key,
              exists: (ttls[i] as number) !== -2,
              pttlMs: ttls[i],
              decision: decisions[i],
            })),
          },
          (_k, v) => (v === Number.POSITIVE_INFINITY ? null : v),
          2,
        ),
      );
      return EXIT.ok;
    }
    console.log(header(found, options));
    console.log(
      `cost ${cost}, namespace "${options.namespace}" at ${redacted(url)} (a peek: nothing is consumed)`,
    );
    targets.forEach((t, i) => {
      console.log('');
      console.log(`${t.name}  ${describePolicy(t.policy)}, ${scopeWords(t.per)}`);
      console.log(`  a take now  ${decisionWords(decisions[i] as Decision, cost)}`);
      console.log(`  key         ${t.key}`);
      console.log(`  PTTL        ${ttlWords(ttls[i] as number)}`);
    });
    console.log('');
    const refusing = targets.filter((_, i) => !decisions[i]?.allowed).map((t) => t.name);
    console.log(
      allowed
        ? targets.length > 1
          ? 'A request now would be admitted: every limit admits it.'
          : 'A request now would be admitted.'
        : `A request now would be refused by ${refusing.join(', ')} (and spend nothing).`,
    );
    return EXIT.ok;
  } finally {
    await disconnect(client);
  }
}

/** `sluice reset`: deletes the state of each (or the chosen) limit's scope, once confirmed. */
export async function reset(options: ResetOptions): Promise<number> {
  const config = await readConfig(options.config);
  if (!options.yes && !process.stdin.isTTY) {
    throw usage('refusing to delete without a confirmation: stdin is not a terminal (add --yes)');
  }
  const url = redisUrl(options);
  const client = await connect(url);
  try {
    const limiter = limiterFor(client, options.namespace);
    const resolved = targetsOf(config, options, limiter);
    const { found } = resolved;
    let targets = resolved.targets;
    if (options.policy !== undefined && options.policy.length > 0) {
      const wanted = options.policy;
      const unknown = wanted.filter(
        (name) => !targets.some((t) => t.name === name || t.policy.name === name),
      );
      if (unknown.length > 0) {
        throw new CliError(
          `no limit named ${unknown.map((n) => `"${n}"`).join(', ')} on ${found.route} for tenant "${found.tenant}"`,
          EXIT.failed,
          [`Its limits: ${targets.map((t) => t.name).join(', ')}`],
          { limits: targets.map((t) => t.name) },
        );
      }
      targets = targets.filter((t) => wanted.includes(t.name) || wanted.includes(t.policy.name));
    }
    let ttls: number[];
    try {
      ttls = await pttls(
        client,
        targets.map((t) => t.key),
      );
    } catch (error) {
      redisFailure(error, url);
    }
    const lines = targets.map(
      (t, i) => `  ${t.name}  ${scopeWords(t.per)}\n    ${t.key}  ${ttlWords(ttls[i] as number)}`,
    );
    if (!options.json || !options.yes) {
      const out = options.json ? console.error : console.log;
      out(header(found, options));
      out(`namespace "${options.namespace}" at ${redacted(url)}; the state of:`);
      for (const line of lines) out(line);
    }
    if (!options.yes) {
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      let answer: string;
      try {
        answer = await rl.question(
          `Delete the state of ${targets.length === 1 ? 'this limit' : `these ${targets.length} limits`}? Type "yes": `,
        );
      } finally {
        rl.close();
      }
      if (!/^y(es)?$/i.test(answer.trim())) {
        throw new CliError('not confirmed: nothing deleted', EXIT.failed);
      }
    }
    let existed: boolean[];
    try {
      // One DEL per key (never a pattern), then the namespace's reset epoch, so that every
      // limiter's local denial cache follows within 750 ms.
      existed = await Promise.all(targets.map((t) => limiter.reset(t.scope, t.policy)));
    } catch (error) {
      redisFailure(error, url);
    }
    if (options.json) {
      console.log(
        JSON.stringify(
          {
            ok: true,
            route: found.route,
            tenant: found.tenant,
            user: options.user ?? null,
            plan: found.plan ?? null,
            namespace: options.namespace,
            reset: targets.map((t, i) => ({
              name: t.name,
              policy: t.policy.name,
              per: t.per,
              key: t.key,
              deleted: existed[i],
            })),
          },
          null,
          2,
        ),
      );
      return EXIT.ok;
    }
    targets.forEach((t, i) => {
      console.log(`${existed[i] ? 'deleted ' : 'no state'}  ${t.name}  ${t.key}`);
    });
    const n = existed.filter(Boolean).length;
    console.log(
      `${n} key${n === 1 ? '' : 's'} deleted; every limiter on this namespace stops answering cached denials for them within 750 ms.`,
    );
    return EXIT.ok;
  } finally {
    await disconnect(client);
  }
}
