/**
 * `sluice reset`: deletes the state of a route's limits for a tenant (and user) — each
 * limit's one key, never a pattern — after showing the keys and asking for a confirmation.
 */
import { createInterface } from 'node:readline/promises';
import { CliError, EXIT, readConfig, redacted, usage } from './common.js';
import { escapeControls, print, printError, printJson } from './output.js';
import {
  header,
  onRedis,
  pttls,
  type ScopeOptions,
  type Session,
  scopeWords,
  type Target,
  ttlWords,
  withSession,
} from './scopes.js';

/** Options of `sluice reset`. */
export interface ResetOptions extends ScopeOptions {
  readonly policy?: string[];
  readonly yes?: boolean;
}

/** `sluice reset`: deletes the state of each (or the chosen) limit's scope, once confirmed. */
export async function reset(options: ResetOptions): Promise<number> {
  const config = await readConfig(options.config);
  if (!options.yes && !process.stdin.isTTY) {
    throw usage('refusing to delete without a confirmation: stdin is not a terminal (add --yes)');
  }
  return withSession(config, options, async (session) => {
    const targets = chosen(session, options.policy);
    const ttls = await onRedis(session.url, () =>
      pttls(
        session.client,
        targets.map((t) => t.key),
      ),
    );
    if (!options.json || !options.yes) showScope(session, targets, ttls, options);
    if (!options.yes) await confirm(targets.length);
    // One DEL per key (never a pattern), then the namespace's reset epoch, so that every
    // limiter's local denial cache follows within 750 ms.
    const existed = await onRedis(session.url, () =>
      Promise.all(targets.map((t) => session.limiter.reset(t.scope, t.policy))),
    );
    if (options.json) printResetJson(session, targets, existed, options);
    else printResetText(targets, existed);
    return EXIT.ok;
  });
}

/** The limits `--policy` names (by limit or policy name), or every one without it. */
function chosen(session: Session, wanted: readonly string[] | undefined): Target[] {
  const { found, targets } = session;
  if (wanted === undefined || wanted.length === 0) return targets;
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
  return targets.filter((t) => wanted.includes(t.name) || wanted.includes(t.policy.name));
}

/** What is about to be deleted: on stdout, or on stderr when stdout carries the JSON. */
function showScope(
  session: Session,
  targets: readonly Target[],
  ttls: readonly number[],
  options: ResetOptions,
): void {
  const out = options.json ? printError : print;
  out(header(session.found, options));
  out(`namespace "${options.namespace}" at ${redacted(session.url)}; the state of:`);
  targets.forEach((t, i) => {
    out(`  ${t.name}  ${scopeWords(t.per)}`);
    out(`    ${t.key}  ${ttlWords(ttls[i] as number)}`);
  });
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
  targets: readonly Target[],
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
  );
}

function printResetText(targets: readonly Target[], existed: readonly boolean[]): void {
  targets.forEach((t, i) => {
    print(`${existed[i] ? 'deleted ' : 'no state'}  ${t.name}  ${t.key}`);
  });
  const n = existed.filter(Boolean).length;
  print(
    `${n} key${n === 1 ? '' : 's'} deleted; every limiter on this namespace stops answering cached denials for them within 750 ms.`,
  );
}
