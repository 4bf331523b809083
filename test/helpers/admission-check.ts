/**
 * Test-only: checks a log of admitted decisions (Redis time, per key) against each policy's
 * promise, re-deriving the bound from the log alone — never from the script's own counters:
 *
 * - fixed window: a window starts with the take that created the counter and lasts
 *   `windowMs`; the costs admitted in it sum to ≤ limit, and no window starts before the
 *   previous one has ended (1 ms of TTL rounding allowed);
 * - sliding window log: in every window of `windowMs` ending at an admission, ≤ limit;
 * - sliding window counter: at every admission, previous × (W − elapsed) + current × W ≤
 *   limit × W over the aligned windows (so ≤ limit in each aligned window);
 * - token bucket: replaying the admissions on a bucket that refills continuously, every take
 *   finds its cost in the bucket;
 * - GCRA: replaying the admissions, every take conforms (TAT + cost × T − burst × T ≤ now).
 *
 * Denied takes write nothing, so admissions alone determine each policy's state.
 */
import type { LoggedAdmission } from './decision-log.js';

export interface Violation {
  readonly key: string;
  readonly algorithm: string;
  readonly us: number;
  readonly detail: string;
}

const ms = (us: number) => Math.floor(us / 1000);

function fixedWindow(
  entries: readonly LoggedAdmission[],
  report: (e: LoggedAdmission, d: string) => void,
) {
  let start: number | undefined;
  let used = 0;
  for (const e of entries) {
    const [limit, windowMs, cost] = e.args as [number, number, number];
    const created = e.reply[1] === limit - cost;
    if (created) {
      if (start !== undefined && e.us < start + (windowMs - 1) * 1000) {
        report(
          e,
          `a new window ${(e.us - start) / 1000} ms after the last began (window ${windowMs} ms)`,
        );
      }
      start = e.us;
      used = 0;
    } else if (start === undefined || e.us > start + (windowMs + 1) * 1000) {
      report(e, 'counted in a window that had already ended');
    }
    used += cost;
    if (used > limit) report(e, `${used} admitted in one window (limit ${limit})`);
  }
}

function slidingWindowLog(
  entries: readonly LoggedAdmission[],
  report: (e: LoggedAdmission, d: string) => void,
) {
  let first = 0;
  let inWindow = 0;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as LoggedAdmission;
    const [limit, windowMs, cost] = e.args as [number, number, number];
    // Entries admitted at s are in the window ending at now while s > now − windowMs.
    while (first < i && ms((entries[first] as LoggedAdmission).us) <= ms(e.us) - windowMs) {
      inWindow -= (entries[first] as LoggedAdmission).args[2] as number;
      first++;
    }
    inWindow += cost;
    if (inWindow > limit) report(e, `${inWindow} admitted within ${windowMs} ms (limit ${limit})`);
  }
}

function slidingWindowCounter(
  entries: readonly LoggedAdmission[],
  report: (e: LoggedAdmission, d: string) => void,
) {
  const perWindow = new Map<number, number>();
  for (const e of entries) {
    const [limit, windowMs, cost] = e.args as [number, number, number];
    const now = ms(e.us);
    const index = Math.floor(now / windowMs);
    const elapsed = now - index * windowMs;
    const previous = perWindow.get(index - 1) ?? 0;
    const current = (perWindow.get(index) ?? 0) + cost;
    perWindow.set(index, current);
    if (previous * (windowMs - elapsed) + current * windowMs > limit * windowMs) {
      report(
        e,
        `estimate ${previous} × ${windowMs - elapsed}/${windowMs} + ${current} > limit ${limit}`,
      );
    }
  }
}

function tokenBucket(
  entries: readonly LoggedAdmission[],
  report: (e: LoggedAdmission, d: string) => void,
) {
  let scaled: number | undefined;
  let last = 0;
  for (const e of entries) {
    const [capacity, refill, intervalMs, cost] = e.args as [number, number, number, number];
    const now = ms(e.us);
    const full = capacity * intervalMs;
    scaled =
      scaled === undefined ? full : Math.min(full, scaled + Math.max(0, now - last) * refill);
    last = Math.max(last, now);
    if (scaled < cost * intervalMs) {
      report(e, `took ${cost} with ${scaled / intervalMs} tokens in the bucket`);
    }
    scaled -= cost * intervalMs;
  }
}

function gcra(
  entries: readonly LoggedAdmission[],
  report: (e: LoggedAdmission, d: string) => void,
) {
  let tat = 0;
  for (const e of entries) {
    const [intervalUs, burst, cost] = e.args as [number, number, number];
    const next = Math.max(tat, e.us) + cost * intervalUs;
    if (next - burst * intervalUs > e.us) {
      report(e, `not conforming by ${next - burst * intervalUs - e.us} µs`);
    }
    tat = next;
  }
}

const CHECKS: Record<string, typeof gcra> = {
  fw: fixedWindow,
  swlw: slidingWindowLog,
  swc: slidingWindowCounter,
  tb: tokenBucket,
  gcra,
};

/** The algorithm tag of a sluice key: `<namespace>:{<tenant>}:<tag>.<policy digest>[:…]`. */
export function algorithmOf(key: string): string {
  const match = /^[^{}]+:\{[0-9a-f]+\}:([a-z]+)\.[0-9a-f]+(:|$)/.exec(key);
  if (match === null) throw new Error(`not a sluice key: ${key}`);
  return match[1] as string;
}

/** Every violation of a policy's bound found in `log` (in stream order). */
export function checkAdmissions(log: readonly LoggedAdmission[]): Violation[] {
  const byKey = new Map<string, LoggedAdmission[]>();
  for (const e of log) {
    const entries = byKey.get(e.key);
    if (entries === undefined) byKey.set(e.key, [e]);
    else entries.push(e);
  }
  const violations: Violation[] = [];
  for (const [key, entries] of byKey) {
    const algorithm = algorithmOf(key);
    const check = CHECKS[algorithm];
    if (check === undefined) throw new Error(`no check for algorithm ${algorithm}`);
    check(entries, (e, detail) => violations.push({ key, algorithm, us: e.us, detail }));
  }
  return violations;
}
