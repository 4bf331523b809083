/**
 * Turns the raw results into bench/RESULTS.md: machine, method, correctness gate, server
 * limit, a summary table of medians across rounds, sluice's ratios against each contender,
 * and one table per round.
 */
import type { CheckResult } from './check.js';
import type { Environment } from './environment.js';
import type { ScriptTimeResult } from './script-time.js';
import type { ServerLimit } from './server-limit.js';
import { renderTargets } from './targets.js';
import type { RunResult } from './types.js';

export interface RunFailure {
  readonly round: number;
  readonly contender: string;
  readonly scenario: string;
  readonly concurrency: number;
  readonly message: string;
}

export interface BenchResults {
  readonly environment: Environment;
  readonly options: {
    readonly commandLine: string;
    readonly durationMs: number;
    readonly warmupMs: number;
    readonly rounds: number;
    readonly contenders: readonly string[];
    readonly scenarios: readonly string[];
    readonly concurrency: readonly number[];
  };
  readonly contenderDescriptions: Record<string, string>;
  readonly scenarioDescriptions: Record<string, string>;
  readonly checks: readonly CheckResult[];
  readonly serverLimits: readonly ServerLimit[];
  /** The longest script call per policy at its worst accepted parameters (bench/script-time.ts). */
  readonly scriptTimes?: readonly ScriptTimeResult[];
  readonly runs: readonly RunResult[];
  readonly failures: readonly RunFailure[];
  readonly wallClockSec: number;
}

/** Medians across rounds of one contender × scenario × concurrency. */
export interface SummaryRow {
  readonly contender: string;
  readonly scenario: string;
  readonly concurrency: number;
  readonly rounds: number;
  readonly decisionsPerSec: number;
  /** (max − min) / median of decisions/s across rounds. */
  readonly decisionsPerSecSpread: number;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly p999Us: number;
  readonly nodeCpuUsPerDecision: number;
  readonly redisCpuUsPerDecision: number;
  readonly redisCommandsPerDecision: number;
  readonly scriptCallsPerDecision: number;
  readonly allowedShare: number;
  /** Summed over rounds. */
  readonly errors: number;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function summarize(results: BenchResults): SummaryRow[] {
  const rows: SummaryRow[] = [];
  const { scenarios, concurrency, contenders } = results.options;
  for (const scenario of scenarios) {
    for (const c of concurrency) {
      for (const contender of contenders) {
        const runs = results.runs.filter(
          (r) => r.scenario === scenario && r.concurrency === c && r.contender === contender,
        );
        if (runs.length === 0) continue;
        const med = (pick: (r: RunResult) => number) => median(runs.map(pick));
        const rates = runs.map((r) => r.decisionsPerSec);
        rows.push({
          contender,
          scenario,
          concurrency: c,
          rounds: runs.length,
          decisionsPerSec: med((r) => r.decisionsPerSec),
          decisionsPerSecSpread: (Math.max(...rates) - Math.min(...rates)) / median(rates),
          p50Us: med((r) => r.p50Us),
          p99Us: med((r) => r.p99Us),
          p999Us: med((r) => r.p999Us),
          nodeCpuUsPerDecision: med((r) => r.nodeCpuUsPerDecision),
          redisCpuUsPerDecision: med((r) => r.redisCpuUsPerDecision),
          redisCommandsPerDecision: med((r) => r.redisCommandsPerDecision),
          scriptCallsPerDecision: med((r) => r.scriptCallsPerDecision),
          allowedShare: med((r) => (r.decisions === 0 ? 0 : r.allowed / r.decisions)),
          errors: runs.reduce((sum, r) => sum + r.errors, 0),
        });
      }
    }
  }
  return rows;
}

const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const fixed = (digits: number) => (n: number) => (Number.isFinite(n) ? n.toFixed(digits) : '–');
const ratio = (a: number, b: number) =>
  b > 0 && Number.isFinite(a) ? `${(a / b).toFixed(2)}×` : '–';
const percent = (share: number) => `${(share * 100).toFixed(share > 0 && share < 0.01 ? 2 : 1)}%`;

/** A Markdown table; the first `leftColumns` columns are left-aligned, the rest right. */
function table(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  leftColumns = 1,
): string {
  const align = header.map((_, i) => (i < leftColumns ? '---' : '---:'));
  return [header, align, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

const METRIC_HEADER = [
  'scenario',
  'C',
  'contender',
  'decisions/s',
  'p50 µs',
  'p99 µs',
  'p99.9 µs',
  'Node CPU µs/dec',
  'Redis CPU µs/dec',
  'Redis cmds/dec',
  'scripts/dec',
  'allowed',
  'errors',
];

function metricCells(r: SummaryRow | RunResult, allowedShare: number): string[] {
  // ± is half the range across rounds; one round has no spread to show.
  const spread =
    'decisionsPerSecSpread' in r
      ? r.rounds > 1
        ? ` ±${Math.round((r.decisionsPerSecSpread * 100) / 2)}%`
        : ' (1 round)'
      : '';
  return [
    r.scenario,
    String(r.concurrency),
    r.contender === 'sluice' ? '**sluice**' : r.contender,
    `${int(r.decisionsPerSec)}${spread}`,
    int(r.p50Us),
    int(r.p99Us),
    int(r.p999Us),
    fixed(1)(r.nodeCpuUsPerDecision),
    fixed(1)(r.redisCpuUsPerDecision),
    fixed(2)(r.redisCommandsPerDecision),
    fixed(2)(r.scriptCallsPerDecision),
    percent(allowedShare),
    int(r.errors),
  ];
}

function ratioTable(summary: readonly SummaryRow[]): string {
  const rows: string[][] = [];
  for (const ours of summary.filter((r) => r.contender === 'sluice')) {
    for (const other of summary) {
      if (other.contender === 'sluice') continue;
      if (other.scenario !== ours.scenario || other.concurrency !== ours.concurrency) continue;
      rows.push([
        ours.scenario,
        String(ours.concurrency),
        other.contender,
        ratio(ours.decisionsPerSec, other.decisionsPerSec),
        ratio(ours.p99Us, other.p99Us),
        ratio(ours.redisCpuUsPerDecision, other.redisCpuUsPerDecision),
      ]);
    }
  }
  return table(
    [
      'scenario',
      'C',
      'sluice vs',
      'decisions/s (>1: sluice faster)',
      'p99 (<1: sluice lower)',
      'Redis CPU/dec (<1: sluice cheaper)',
    ],
    rows,
    3,
  );
}

/** The longest script call per policy at its worst accepted parameters. */
function scriptTimeSection(results: BenchResults): string[] {
  const times = results.scriptTimes ?? [];
  if (times.length === 0) return [];
  return [
    '## Longest script call per policy (worst accepted parameters, largest batches)',
    '',
    'Script calls when a limiter with `maxBatchSize: 1024` sends up to 3,072 calls issued in one turn ' +
      'against the worst stored state (bench/script-time.ts). CPU: the heaviest call’s share, by ' +
      'arguments, of the CPU time Redis’s main thread spent in the round (`INFO cpu`); the rule ' +
      '(< 5 ms, asserted by test/integration/script-time.test.ts) is held against the largest. Wall: how ' +
      'long Redis ran each call (`SLOWLOG`), the longest and the second-longest per round; it also counts ' +
      'the moments another process (or the hypervisor) had the core, so about one call in 30–100 meets a ' +
      'pause of a few ms that a trivial Lua `SET` loop shows too.',
    '',
    table(
      ['case', 'CPU µs (largest)', 'CPU µs per round', 'wall µs per round: longest / second'],
      times.map((t) => [
        t.name,
        int(t.cpuUs),
        t.cpuRounds.map(int).join(', '),
        t.rounds.map((r, i) => `${int(r)} / ${int(t.secondRounds[i] ?? Number.NaN)}`).join(', '),
      ]),
    ),
    '',
  ];
}

/** Observations the numbers call for, derived from them. */
function notes(results: BenchResults, summary: readonly SummaryRow[]): string[] {
  const lines: string[] = [];
  const local = summary.filter((r) => r.scriptCallsPerDecision < 0.005);
  if (local.length > 0) {
    const cells = local.map((r) => `${r.contender} ${r.scenario} C=${r.concurrency}`);
    lines.push(
      `- Answered in process, with (almost) no Redis call: ${cells.join(', ')}. ` +
        'Those rows measure a local cache, not the Redis path; compare them with care ' +
        '(`--contenders sluice-uncached,…` measures sluice with its denial cache off).',
    );
  }
  const noisy = summary.filter((r) => r.rounds > 1 && r.decisionsPerSecSpread > 0.3);
  if (noisy.length > 0) {
    lines.push(
      `- Decisions/s varied by more than 30% between rounds in ${noisy.length} of ${summary.length} ` +
        'cells (± is half the range across rounds): on a 2-core machine Redis, the client and ' +
        'anything else running share the cores. More rounds (`--rounds 5`) tighten the medians.',
    );
  }
  const cachedWithErrors = summary.filter(
    (r) => r.errors > 0 && r.scenario === 'hot' && r.scriptCallsPerDecision < 0.005,
  );
  if (cachedWithErrors.length > 0) {
    const cells = cachedWithErrors.map(
      (r) => `${r.contender} ${r.scenario} C=${r.concurrency} (${r.errors} over the rounds)`,
    );
    lines.push(
      `- Timeouts where the denial cache answers: ${cells.join(', ')}. The bench's workers answered ` +
        'in process never yield the event loop (awaiting a settled promise is a microtask), so the few ' +
        'calls that must reach Redis — the reset epoch is read again every 750 ms — wait past their ' +
        '150 ms deadline for the loop to read their replies. A server yields between requests (each ' +
        'arrives as I/O); the same happens with `fastPath: false`.',
    );
  }
  if (results.environment.srcChangedDuringRun) {
    lines.push(
      '- **src/ changed while this ran**: each run imports src/ afresh, so runs may mix versions.',
    );
  }
  return lines.length === 0 ? [] : ['## Notes', '', ...lines, ''];
}

export function renderMarkdown(results: BenchResults): string {
  const { environment: env, options } = results;
  const summary = summarize(results);
  const out: string[] = [];
  out.push(
    '# sluice benchmark results',
    '',
    `Generated ${env.date} by \`${options.commandLine}\` in ${Math.round(results.wallClockSec)} s. ` +
      'Numbers from one small machine: compare contenders with each other, not with other machines.',
    '',
    '## Machine',
    '',
    table(
      ['', 'value'],
      [
        ['CPU', `${env.cpuModel} × ${env.cpuCount}`],
        ['memory', `${env.memoryGiB} GiB`],
        ['OS', env.os],
        ['Node.js', env.node],
        ['Redis', `${env.redis} (private redis-server, loopback, --save '' --appendonly no)`],
        [
          'sluice',
          `${env.packages.sluice} at ${env.git}, src/ fingerprint ${env.srcFingerprint}, measured ${env.build === 'src' ? 'from src/ under tsx' : 'as built (dist/)'}` +
            (env.srcChangedDuringRun ? ' — **src/ changed during the run**' : ''),
        ],
        ...Object.entries(env.packages)
          .filter(([name]) => name !== 'sluice')
          .map(([name, version]) => [name, version]),
      ],
      2,
    ),
    '',
    '## Method',
    '',
    `- Each run is a fresh child process (\`bench/runner.ts\`): set up the contender, warm up ${options.warmupMs} ms, ` +
      `then a closed loop of C workers (each awaits its take, then issues the next) for ${options.durationMs} ms; ` +
      'the calls in flight at the deadline are awaited and counted.',
    `- ${options.rounds} round(s); in each, for every scenario × concurrency, every contender runs once, ` +
      'the order of contenders rotated from round to round. The summary takes the median across rounds.',
    '- Latency: `performance.now()` from the call to its settlement, decisions only (errors are counted apart), ' +
      'exact percentiles. Node CPU: `process.cpuUsage()` of the child over the measured span. ' +
      'Redis CPU: delta (read by the parent just before and after the measured span) of `used_cpu_sys + used_cpu_user`; commands: delta of `INFO commandstats` calls ' +
      '(every command, including those a Lua script calls; the INFO reads are left out); ' +
      'scripts/dec counts only EVAL/EVALSHA calls (round trips): below 1 when several decisions share one ' +
      'script call (coalescing) or when decisions are answered in process with no Redis call (a local cache). ' +
      'All per settled decision.',
    '- Scenarios:',
    ...options.scenarios.map((s) => `  - \`${s}\`: ${results.scenarioDescriptions[s]}`),
    '- Contenders (each given only a key; sluice and seed hash `[tenant, route]` with SHA-256, the others use the key as is):',
    ...options.contenders.map((c) => `  - \`${c}\`: ${results.contenderDescriptions[c]}`),
    '',
    '## Correctness gate',
    '',
    '30 concurrent takes on a fresh key, limit 10 per 60 s: exactly 10 must be allowed, with no error.',
    '',
    table(
      ['contender', 'allowed', 'denied', 'errors', 'result'],
      results.checks.map((c) => [
        c.contender,
        String(c.allowed),
        String(c.denied),
        String(c.errors),
        c.pass ? 'pass' : `**FAIL**${c.firstError ? ` (${c.firstError})` : ''}`,
      ]),
    ),
    '',
    '## Server limit (redis-benchmark)',
    '',
    "What this Redis sustains for sluice's script with no Node.js client in the way " +
      '(50 connections × 16 pipelined; redis-benchmark shares the cores with the server).',
    '',
    table(
      ['case', 'requests/s', 'p50 ms', 'p99 ms'],
      results.serverLimits.map((s) => [
        s.label,
        int(s.requestsPerSec),
        fixed(3)(s.p50Ms),
        fixed(3)(s.p99Ms),
      ]),
    ),
    '',
    ...results.serverLimits.map((s) => `- \`${s.command}\``),
    '',
    ...scriptTimeSection(results),
    `## Summary (median of ${options.rounds} round${options.rounds === 1 ? '' : 's'})`,
    '',
    table(
      METRIC_HEADER,
      summary.map((r) => metricCells(r, r.allowedShare)),
      3,
    ),
    '',
    ...renderTargets(results),
    '## sluice against each contender (ratios of the medians)',
    '',
    ratioTable(summary),
    '',
    '![decisions/s and p99 per contender](results.svg)',
    '',
    ...notes(results, summary),
  );
  for (let round = 1; round <= options.rounds; round++) {
    // Shown in a fixed order; within a scenario × C cell they ran in the rotated order.
    const position = (r: RunResult) =>
      (options.scenarios.indexOf(r.scenario) * options.concurrency.length +
        options.concurrency.indexOf(r.concurrency)) *
        options.contenders.length +
      options.contenders.indexOf(r.contender);
    const runs = results.runs
      .filter((r) => r.round === round)
      .sort((a, b) => position(a) - position(b));
    out.push(
      `## Round ${round}`,
      '',
      table(
        METRIC_HEADER,
        runs.map((r) => metricCells(r, r.decisions === 0 ? 0 : r.allowed / r.decisions)),
        3,
      ),
      '',
    );
  }
  if (results.failures.length > 0) {
    out.push(
      '## Failed runs',
      '',
      ...results.failures.map(
        (f) => `- round ${f.round}, ${f.contender} ${f.scenario} C=${f.concurrency}: ${f.message}`,
      ),
      '',
    );
  }
  const errored = results.runs.filter((r) => r.firstError !== undefined);
  if (errored.length > 0) {
    out.push(
      '## Errors seen',
      '',
      ...errored.map(
        (r) =>
          `- round ${r.round}, ${r.contender} ${r.scenario} C=${r.concurrency}: ${r.errors} × ${r.firstError}`,
      ),
      '',
    );
  }
  return out.join('\n');
}
