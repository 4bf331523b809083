/**
 * The correctness gate run before any measurement: for each contender, 30 concurrent takes
 * on a fresh key under a limit of 10 per 60 s must admit exactly 10, with no errors.
 * For `sluice-takeall3` a take is one all-or-nothing `takeAll` of three stacked limits of the
 * tenant (tenant-wide, per route, per route + user), each 10 per 60 s: the three counters
 * fill together, so again exactly 10 are admitted (and a refused takeAll writes nothing).
 * `sluice-take3` takes the same three limits independently: its first 10 are admitted on
 * all three, the other 20 denied on all three.
 */
import { randomUUID } from 'node:crypto';
import { loadContender } from './contenders/index.js';

export interface CheckResult {
  readonly contender: string;
  readonly allowed: number;
  readonly denied: number;
  readonly errors: number;
  readonly firstError?: string;
  readonly pass: boolean;
}

export const CHECK_CALLS = 30;
export const CHECK_LIMIT = 10;

/** Never rejects: a contender that cannot even be set up fails the check. */
export async function checkContender(name: string, redisUrl: string): Promise<CheckResult> {
  try {
    return await check(name, redisUrl);
  } catch (error) {
    const firstError = error instanceof Error ? error.message : String(error);
    return { contender: name, allowed: 0, denied: 0, errors: 1, firstError, pass: false };
  }
}

async function check(name: string, redisUrl: string): Promise<CheckResult> {
  const contender = await loadContender(name);
  const taker = await contender.setup(redisUrl, { limit: CHECK_LIMIT, windowMs: 60_000 });
  try {
    const key = `check-${name}-${randomUUID()}`;
    const settled = await Promise.allSettled(
      Array.from({ length: CHECK_CALLS }, () => taker.take(key)),
    );
    let allowed = 0;
    let denied = 0;
    let errors = 0;
    let firstError: string | undefined;
    for (const outcome of settled) {
      if (outcome.status === 'rejected') {
        errors++;
        firstError ??= String(outcome.reason);
      } else if (outcome.value) allowed++;
      else denied++;
    }
    const pass = allowed === CHECK_LIMIT && errors === 0;
    return {
      contender: name,
      allowed,
      denied,
      errors,
      ...(firstError === undefined ? {} : { firstError }),
      pass,
    };
  } finally {
    await taker.close();
  }
}
