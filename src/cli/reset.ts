/**
 * `sluice reset`: deletes the state of a route's limits for a tenant (and user) — each
 * limit's one key, never a pattern — after showing the keys, and the limits it leaves, and
 * asking for a confirmation.
 */
import { createInterface } from 'node:readline/promises';
import { CliError, EXIT, readConfig, redacted, usage } from './common.js';
import { escapeControls, print, printError, printJson } from './output.js';
import { planReset, type ResetPlan } from './reset-plan.js';
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

/** Options of `sluice reset`. */
export interface ResetOptions extends ScopeOptions {
  readonly policy?: string[];
  /** With `--user`: also the limits the user shares with the tenant's other users. */
  readonly includeShared?: boolean;
  readonly yes?: boolean;
}

/**
 * `sluice reset`: deletes the state of the chosen limits' scopes (see `planReset`), once
 * confirmed, and says which limits it left as they are.
 */
export async function reset(options: ResetOptions): Promise<number> {
  const config = await readConfig(options.config);
  if (!options.yes && !process.stdin.isTTY) {
    throw usage('refusing to delete without a confirmation: stdin is not a terminal (add --yes)');
  }
  return withSession(
    config,
    options,
    async (session) => {
      const plan = planReset(session, options);
      const keys = [...plan.reset.map((t) => t.key), ...plan.left.flatMap((l) => l.key ?? [])];
      const ttl = new Map(
        (await onRedis(session.url, () => pttls(session.client, keys))).map((p, i) => [
          keys[i] as string,
          p,
        ]),
      );
      if (!options.json || !options.yes) showScope(session, plan, ttl, options);
      if (!options.yes) await confirm(plan.reset.length);
      // One DEL per key (never a pattern), then the namespace's reset epoch, so that every
      // limiter's local denial cache follows within 750 ms.
      const existed = await onRedis(session.url, () =>
        Promise.all(plan.reset.map((t) => session.limiter.reset(t.scope, t.policy))),
      );
      if (options.json) printResetJson(session, plan, existed, options);
      else printResetText(plan, existed);
      return EXIT.ok;
    },
    'skip',
  );
}

/** What is about to be deleted, and what is left: on stdout, or on stderr under `--json`. */
function showScope(
  session: Session,
  plan: ResetPlan,
  ttl: ReadonlyMap<string, number>,
  options: ResetOptions,
): void {
  const out = options.json ? printError : print;
  out(header(session.found, options));
  out(`namespace "${options.namespace}" at ${redacted(session.url)}; the state of:`);
  for (const t of plan.reset) {
    out(`  ${t.name}  ${scopeWords(t.per)}`);
    out(`    ${t.key}  ${ttlWords(ttl.get(t.key) as number)}`);
  }
  if (plan.left.length === 0) return;
  out('left as it is:');
  for (const l of plan.left) {
    out(`  ${l.name}  ${l.reason}`);
    if (l.key !== undefined) out(`    ${l.key}  ${ttlWords(ttl.get(l.key) as number)}`);
  }
}

/** Asks on the terminal; anything but "yes" (or "y") ends the command, nothing deleted. */
async function confirm(limits: number): Promise<void> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  let answer: string;
  try {
    answer = await rl.question(
      escapeControls(
        `Delete the state of ${limits === 1 ? 'this limit' : `these ${limits} limits`}? Type "yes": `,
      ),
    );
  } finally {
    rl.close();
  }
  if (!/^y(es)?$/i.test(answer.trim())) {
    throw new CliError('not confirmed: nothing deleted', EXIT.failed);
  }
}

function printResetJson(
  session: Session,
  plan: ResetPlan,
  existed: readonly boolean[],
  options: ResetOptions,
): void {
  const { found } = session;
  printJson(
    {
      ok: true,
      route: found.route,
      tenant: found.tenant,
      user: options.user ?? null,
      includeShared: options.includeShared === true,
      plan: found.plan ?? null,
      namespace: options.namespace,
      reset: plan.reset.map((t, i) => ({
        name: t.name,
        policy: t.policy.name,
        per: t.per,
        key: t.key,
        deleted: existed[i],
      })),
      left: plan.left.map((l) => ({
        name: l.name,
        policy: l.policy,
        per: l.per,
        key: l.key ?? null,
        reason: l.reason,
      })),
    },
    null,
    2,
  );
}

function printResetText(plan: ResetPlan, existed: readonly boolean[]): void {
  plan.reset.forEach((t, i) => {
    print(`${existed[i] ? 'deleted ' : 'no state'}  ${t.name}  ${t.key}`);
  });
  const n = existed.filter(Boolean).length;
  print(
    `${n} key${n === 1 ? '' : 's'} deleted; every limiter on this namespace stops answering cached denials for them within 750 ms.`,
  );
  if (plan.left.length > 0) {
    print(`Left as they are (see above): ${plan.left.map((l) => l.name).join(', ')}.`);
  }
}
