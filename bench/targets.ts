/**
 * The performance targets of the decision path (issue "Performance"), checked against the
 * summary of a run, each as a ratio of medians measured in the same run. Where a target is
 * missed, `why` says what the profiles showed; RESULTS.md prints it next to the number.
 */
import type { SummaryRow } from './report.js';

export interface Target {
  readonly id: string;
  readonly label: string;
  /** The goal, e.g. `≥ 2×`. */
  readonly goal: string;
  /** The measured ratio, or undefined when a contender or cell was not run. */
  readonly measured: number | undefined;
  readonly met: boolean | undefined;
  /** Shown when the target is missed. */
  readonly why: string;
}

type Metric = 'decisionsPerSec' | 'p50Us' | 'p99Us' | 'redisCpuUsPerDecision';

function cell(summary: readonly SummaryRow[], contender: string, scenario: string, c: number) {
  return summary.find(
    (r) => r.contender === contender && r.scenario === scenario && r.concurrency === c,
  );
}

function ratioOf(
  summary: readonly SummaryRow[],
  metric: Metric,
  scenario: string,
  c: number,
  other: string,
): number | undefined {
  const ours = cell(summary, 'sluice', scenario, c);
  const theirs = cell(summary, other, scenario, c);
  if (ours === undefined || theirs === undefined || !(theirs[metric] > 0)) return undefined;
  return ours[metric] / theirs[metric];
}

const WHY = {
  throughputRlf:
    'Redis is the bottleneck of this cell: on random keys every decision creates a key with a TTL, and sluice ' +
    'runs at about the server limit that `redis-benchmark` measures for the same script (see "Server limit"; ' +
    'Redis CPU/dec × decisions/s ≈ 0.9 of a core). rate-limiter-flexible 11 on ioredis 6 reached 2.2–2.5× the ' +
    '35–41k/s the issue measured; beating it 2× would need Redis to do half the work per new key.',
  floor:
    'The floor is one bare socket writing each EVALSHA the moment it is called; sluice goes through node-redis, ' +
    'which builds a command object and an options spread per command and defers every socket write to ' +
    '`setImmediate` (`@redis/client` `client/index.js` `#scheduleWrite`).',
  p99:
    'In a closed loop, latency is concurrency ÷ throughput (Little’s law): with Redis saturated (see the ' +
    'throughput row) the p99 ratio tracks the throughput ratio; the tail adds a batch waiting for its whole ' +
    'batch script and GC pauses.',
  redisCpu:
    'On random keys the Redis work is dominated by creating a key and its expiry entry (one `SET … PX` per new ' +
    'window); coalescing removes only the per-call overhead (the floor runs the same script one EVALSHA per ' +
    'decision: compare its Redis CPU/dec). On the hot key, where no key is created, sluice-uncached needs about ' +
    'a third of rate-limiter-flexible’s Redis CPU per decision.',
  c1:
    'At concurrency 1 every decision is one round trip through node-redis: its `setImmediate` write ' +
    '(a full event-loop turn) and its per-command `AbortSignal.timeout` (node-redis’s 5 s command timeout; ' +
    '`createRedisClient({ commandTimeoutMs: 0 })` turns it off, measured about 30 µs less Node CPU per decision). ' +
    'rate-limit-redis, on the same client, shows about the same latency; an ioredis store (planned) writes at once.',
  hot:
    'On a hot, exhausted key sluice answers from the local denial cache, so its rate is the cost of ' +
    'validating the scope, the cache lookup and the bench loop itself (an await, two clock reads and a latency ' +
    'record per decision) in one Node process.',
  deadline:
    'The deadline costs one queue slot per call and no timer; a miss here is run-to-run noise.',
} as const;

/** Evaluates every target against `summary`. */
export function evaluateTargets(summary: readonly SummaryRow[]): Target[] {
  const at = (
    id: string,
    label: string,
    goal: string,
    measured: number | undefined,
    test: (x: number) => boolean,
    why: string,
  ): Target => ({
    id,
    label,
    goal,
    measured,
    met: measured === undefined ? undefined : test(measured),
    why,
  });
  return [
    at(
      'throughput-rlf',
      'decisions/s, random keys, C=256: sluice ÷ rate-limiter-flexible',
      '≥ 2×',
      ratioOf(summary, 'decisionsPerSec', 'random', 256, 'rate-limiter-flexible'),
      (x) => x >= 2,
      WHY.throughputRlf,
    ),
    at(
      'throughput-floor',
      'decisions/s, random keys, C=256: sluice ÷ floor',
      '≥ 1×',
      ratioOf(summary, 'decisionsPerSec', 'random', 256, 'floor'),
      (x) => x >= 1,
      WHY.floor,
    ),
    at(
      'p99-rlf',
      'p99 latency, random keys, C=256: sluice ÷ rate-limiter-flexible',
      '≤ 0.5×',
      ratioOf(summary, 'p99Us', 'random', 256, 'rate-limiter-flexible'),
      (x) => x <= 0.5,
      WHY.p99,
    ),
    at(
      'deadline',
      'decisions/s, random keys, C=256: sluice ÷ sluice-nodeadline (deadline on vs off)',
      '≥ 0.9×',
      ratioOf(summary, 'decisionsPerSec', 'random', 256, 'sluice-nodeadline'),
      (x) => x >= 0.9,
      WHY.deadline,
    ),
    at(
      'redis-cpu',
      'Redis CPU per decision, random keys, C=256: sluice ÷ rate-limiter-flexible',
      '≤ 0.5×',
      ratioOf(summary, 'redisCpuUsPerDecision', 'random', 256, 'rate-limiter-flexible'),
      (x) => x <= 0.5,
      WHY.redisCpu,
    ),
    at(
      'hot',
      'decisions/s, hot denied key, C=256 (denial cache on): sluice ÷ rate-limiter-flexible',
      '≥ 10×',
      ratioOf(summary, 'decisionsPerSec', 'hot', 256, 'rate-limiter-flexible'),
      (x) => x >= 10,
      WHY.hot,
    ),
    at(
      'c1-p50',
      'p50 latency, random keys, C=1: sluice ÷ floor',
      '≤ 1.2×',
      ratioOf(summary, 'p50Us', 'random', 1, 'floor'),
      (x) => x <= 1.2,
      WHY.c1,
    ),
  ];
}

/** The targets as Markdown: a table, then the reason under each missed one. */
export function renderTargets(summary: readonly SummaryRow[]): string[] {
  const targets = evaluateTargets(summary);
  const rows = targets.map((t) => [
    t.label,
    t.goal,
    t.measured === undefined ? '–' : `${t.measured.toFixed(2)}×`,
    t.met === undefined ? 'not run' : t.met ? 'met' : '**missed**',
  ]);
  const lines = [
    '## Targets (ratios of medians, same run)',
    '',
    '| target | goal | measured | verdict |',
    '| --- | --- | ---: | --- |',
    ...rows.map((cells) => `| ${cells.join(' | ')} |`),
    '',
  ];
  const missed = targets.filter((t) => t.met === false);
  if (missed.length > 0) {
    lines.push('Why the missed ones miss:', '');
    for (const t of missed)
      lines.push(`- **${t.label}** (${t.measured?.toFixed(2)}×, goal ${t.goal}): ${t.why}`);
    lines.push('');
  }
  return lines;
}
