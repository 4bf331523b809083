/**
 * `sluice inspect`: for each limit of a route for a tenant, the units left now and when the
 * scope is clean again, what a take of the given cost would decide now (`peek`, consuming
 * nothing and writing nothing), the Redis key of its scope and the key's PTTL; for a
 * concurrency limit, its live leases.
 */
import { describePolicy } from '../config/index.js';
import type { Decision } from '../types.js';
import { type BlockState, blockState, blockWords } from './blocks.js';
import { count, duration, EXIT, readConfig, redacted } from './common.js';
import { type LiveLease, leaseWords, liveLeases } from './leases.js';
import { print, printJson } from './output.js';
import {
  header,
  onRedis,
  pttls,
  type ScopeOptions,
  type Session,
  scopeWords,
  ttlWords,
  withSession,
} from './scopes.js';

/** Options of `sluice inspect`. */
export interface InspectOptions extends ScopeOptions {
  readonly cost?: number;
}

/** `sluice inspect`: the units left and what a take would decide for each limit, its key and PTTL. */
export async function inspect(options: InspectOptions): Promise<number> {
  const config = await readConfig(options.config);
  return withSession(config, options, async (session) => {
    const { client, limiter, targets } = session;
    const cost = options.cost ?? session.found.settings.cost;
    // Peeks write nothing (not even a repair); PTTL only reads.
    const decisions = await onRedis(session.url, () =>
      Promise.all(targets.map((t) => limiter.peek(t.scope, t.policy, { cost }))),
    );
    const ttls = await onRedis(session.url, () =>
      pttls(
        client,
        targets.map((t) => t.key),
      ),
    );
    const leases = await onRedis(session.url, () =>
      Promise.all(targets.map((t) => liveLeases(client, t.policy, t.key))),
    );
    const blocks = await onRedis(session.url, () =>
      Promise.all(targets.map((t) => blockState(client, t.policy, t.key))),
    );
    const state: PeekedState = { cost, decisions, ttls, leases, blocks };
    if (options.json) printInspectJson(session, state, options);
    else printInspectText(session, state, options);
    return EXIT.ok;
  });
}

/** What `inspect` read: each limit's would-be decision and its key's PTTL. */
interface PeekedState {
  readonly cost: number;
  readonly decisions: readonly Decision[];
  readonly ttls: readonly number[];
  /** A concurrency limit's live leases (undefined for a rate limit). */
  readonly leases: readonly (LiveLease[] | undefined)[];
  /** A policy with `blockMs`: its scope's block (undefined for a policy without). */
  readonly blocks: readonly (BlockState | undefined)[];
}

function printInspectJson(session: Session, state: PeekedState, options: InspectOptions): void {
  const { found, targets } = session;
  const { decisions, ttls } = state;
  printJson(
    {
      ok: true,
      route: found.route,
      tenant: found.tenant,
      user: options.user ?? null,
      plan: found.plan ?? null,
      planFrom: found.planFrom ?? null,
      source: found.source,
      namespace: options.namespace,
      cost: state.cost,
      allowed: decisions.every((d) => d.allowed),
      limits: targets.map((t, i) => ({
        name: t.name,
        policy: t.policy.name,
        algorithm: t.policy.algorithm,
        limit: t.policy.limit,
        // A concurrency policy's span is its lease's life, named as in the policy.
        ...(t.policy.algorithm === 'concurrency'
          ? { leaseMs: t.policy.quotaWindowMs }
          : { windowMs: t.policy.quotaWindowMs }),
        per: t.per,
        scope: t.scope,
        key: t.key,
        exists: (ttls[i] as number) !== -2,
        fresh: isFresh(decisions[i] as Decision, ttls[i] as number),
        pttlMs: ttls[i],
        decision: decisions[i],
        ...(state.leases[i] === undefined ? {} : { leases: state.leases[i] }),
        ...(state.blocks[i] === undefined ? {} : { block: state.blocks[i] }),
      })),
    },
    (_k, v) => (v === Number.POSITIVE_INFINITY ? null : v),
    2,
  );
}

function printInspectText(session: Session, state: PeekedState, options: InspectOptions): void {
  const { found, targets } = session;
  const { cost, decisions, ttls } = state;
  print(header(found, options));
  print(
    `cost ${cost}, namespace "${options.namespace}" at ${redacted(session.url)} (a peek: nothing is consumed)`,
  );
  targets.forEach((t, i) => {
    print('');
    print(`${t.name}  ${describePolicy(t.policy)}, ${scopeWords(t.per)}`);
    const decision = decisions[i] as Decision;
    print(`  left now    ${leftWords(decision, ttls[i] as number)}`);
    print(`  a take now  ${decisionWords(decision, cost)}`);
    print(`  key         ${t.key}`);
    print(`  PTTL        ${ttlWords(ttls[i] as number)}`);
    const leases = state.leases[i];
    if (leases !== undefined) print(`  leases      ${leaseWords(leases, duration)}`);
    const block = state.blocks[i];
    if (block !== undefined) print(`  block       ${blockWords(block, duration)}`);
  });
  print('');
  const refusing = targets.filter((_, i) => !decisions[i]?.allowed).map((t) => t.name);
  print(
    refusing.length === 0
      ? targets.length > 1
        ? 'A request now would be admitted: every limit admits it.'
        : 'A request now would be admitted.'
      : `A request now would be refused by ${refusing.join(', ')} (and spend nothing).`,
  );
}

/**
 * No state: the scope has no key and the peek found the whole quota left (a key that expired
 * between the peek and the PTTL read is not called fresh).
 */
function isFresh(d: Decision, pttl: number): boolean {
  return pttl === -2 && d.remaining === d.limit;
}

/** The state now: the units left and, from the peek's resetMs, when the scope is clean again. */
function leftWords(d: Decision, pttl: number): string {
  const left = `${count(d.remaining)} of ${count(d.limit)}`;
  if (isFresh(d, pttl)) return `no state: a fresh quota, ${left} left`;
  return d.resetMs > 0 ? `${left}, clean again in ${duration(d.resetMs)}` : left;
}

function decisionWords(d: Decision, cost: number): string {
  if (d.allowed) return 'allowed';
  if (!Number.isFinite(d.retryAfterMs)) {
    return `refused: a cost of ${cost} is more than this policy can ever admit`;
  }
  return `refused, retry in ${duration(d.retryAfterMs)}`;
}
