/**
 * What `sluice reset` deletes and what it leaves, decided before Redis is touched: with
 * `--user`, the limits whose scope includes that user (per user, per user on the route);
 * the limits the user shares with the tenant's other users (per route, per tenant) only
 * with `--include-shared`. Without `--user`, the shared limits only: each user's own key
 * of a per-user limit is found from the user's id, and finding every user's would take a
 * scan of the keyspace, which sluice never does.
 */
import type { LimitScope } from '../http/limits.js';
import { CliError, EXIT, usage } from './common.js';
import { perUser, type Session, scopeWords, type Target } from './scopes.js';

/** One limit of the route that the reset leaves as it is, and why. */
export interface Left {
  readonly name: string;
  readonly policy: string;
  readonly per: LimitScope;
  /** Its key, when it has one without a user (a limit per user has none without `--user`). */
  readonly key: string | undefined;
  readonly reason: string;
}

/** The limits a reset deletes, and those it leaves. */
export interface ResetPlan {
  readonly reset: readonly Target[];
  readonly left: readonly Left[];
}

/** What chooses the limits: `--user`, `--include-shared`, `--policy`. */
export interface Choice {
  readonly user?: string;
  readonly includeShared?: boolean;
  readonly policy?: readonly string[];
}

/**
 * The limits of the session's route to reset and to leave.
 *
 * @throws {CliError} exit 2 for `--include-shared` without `--user`, `--user` on a route
 *   with no limit counted per user, a `--policy` the other options exclude, or nothing to
 *   reset; exit 1 for a `--policy` that names no limit of the route.
 */
export function planReset(session: Pick<Session, 'found' | 'targets'>, choice: Choice): ResetPlan {
  const { found, targets } = session;
  const { user, includeShared = false } = choice;
  const limits = found.limits.map((l, i) => ({
    name: found.names[i] as string,
    policy: l.policy.name,
    per: l.per,
    target: targets.find((t) => t.name === found.names[i]),
  }));
  const listed = limits.map((l) => `${l.name} ${l.per === 'route' ? 'per route' : `per ${l.per}`}`);
  if (includeShared && user === undefined) {
    throw usage(
      '--include-shared goes with --user (without --user, reset resets the limits the tenant’s users share, and only those)',
    );
  }
  if (user !== undefined && !limits.some((l) => perUser(l.per))) {
    throw usage(
      `--user: no limit of ${found.route} for tenant "${found.tenant}" is counted per user (its limits: ${listed.join(', ')}); reset without --user`,
    );
  }
  const wanted = choice.policy ?? [];
  const named = (l: (typeof limits)[number]) =>
    wanted.includes(l.name) || wanted.includes(l.policy);
  const unknown = wanted.filter((w) => !limits.some((l) => l.name === w || l.policy === w));
  if (unknown.length > 0) {
    throw new CliError(
      `no limit named ${unknown.map((n) => `"${n}"`).join(', ')} on ${found.route} for tenant "${found.tenant}"`,
      EXIT.failed,
      [`Its limits: ${limits.map((l) => l.name).join(', ')}`],
      { limits: limits.map((l) => l.name) },
    );
  }
  const reset: Target[] = [];
  const left: Left[] = [];
  for (const l of limits) {
    const why = reasonToLeave(l.per, found.tenant, user, includeShared);
    if (why !== undefined && wanted.length > 0 && named(l)) {
      throw usage(`--policy ${l.name}: ${why}`);
    }
    const reason = why ?? (wanted.length > 0 && !named(l) ? 'not named by --policy' : undefined);
    if (reason === undefined) reset.push(l.target as Target);
    else left.push({ name: l.name, policy: l.policy, per: l.per, key: l.target?.key, reason });
  }
  if (reset.length === 0) {
    // Without --user, every limit of the route is counted per user.
    throw usage(
      `--user is needed: ${limits.map((l) => `"${l.name}" counts ${scopeWords(l.per)}`).join(', ')}`,
    );
  }
  return { reset, left };
}

/** Why a limit on scope `per` is left as it is by these options, or undefined. */
function reasonToLeave(
  per: LimitScope,
  tenant: string,
  user: string | undefined,
  includeShared: boolean,
): string | undefined {
  if (perUser(per)) {
    return user === undefined
      ? `counted ${scopeWords(per)}: each user has a key of their own; give --user to reset one user’s (every user’s would take a scan of the keyspace, which reset never does)`
      : undefined;
  }
  if (user !== undefined && !includeShared) {
    return `counted ${scopeWords(per)}, shared by every user of tenant "${tenant}": add --include-shared to reset it too`;
  }
  return undefined;
}
