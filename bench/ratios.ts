/**
 * Per-round ratios of one contender against another, from a results.json written by run.ts:
 * `node --import tsx bench/ratios.ts <dir> [--pair base:vs[:limit]]…`
 *
 * Runs of the same round, scenario and concurrency are paired (run.ts interleaves the
 * contenders within a round), and each pair gives one ratio `vs / base` per metric:
 * decisions/s, Node (client process) CPU per decision and Redis CPU per decision. Each table
 * shows the ratio of the medians and the spread of the per-round ratios (min–max); with a
 * limit, whether each cost ratio is within it. Default pairs: `sluice:sluice-takeall3:1.5`,
 * and `sluice-take3:sluice-takeall3` when the results hold sluice-take3. Writes
 * `<dir>/RATIOS.md` and prints it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { type BenchResults, median } from './report.js';
import type { RunResult } from './types.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { pair: { type: 'string', multiple: true } },
});
const dir = resolve(positionals[0] ?? 'bench/takeall');
const results = JSON.parse(readFileSync(`${dir}/results.json`, 'utf8')) as BenchResults;

interface Metric {
  readonly label: string;
  readonly pick: (r: RunResult) => number;
  /** Whether the ratio is a cost, held against `limit`. */
  readonly cost: boolean;
}

const METRICS: readonly Metric[] = [
  { label: 'decisions/s', pick: (r) => r.decisionsPerSec, cost: false },
  { label: 'Node CPU µs/dec', pick: (r) => r.nodeCpuUsPerDecision, cost: true },
  { label: 'Redis CPU µs/dec', pick: (r) => r.redisCpuUsPerDecision, cost: true },
];

const f2 = (n: number) => n.toFixed(2);
const f1 = (n: number) => n.toFixed(1);

function pairTable(base: string, vs: string, limit: number | undefined): string {
  const rows: string[] = [];
  for (const scenario of results.options.scenarios) {
    for (const c of results.options.concurrency) {
      const runsOf = (name: string) =>
        results.runs.filter(
          (r) => r.contender === name && r.scenario === scenario && r.concurrency === c,
        );
      const ours = runsOf(base);
      const theirs = runsOf(vs);
      for (const metric of METRICS) {
        const perRound: number[] = [];
        for (const a of ours) {
          const b = theirs.find((r) => r.round === a.round);
          if (b !== undefined && metric.pick(a) > 0) {
            perRound.push(metric.pick(b) / metric.pick(a));
          }
        }
        if (perRound.length === 0) continue;
        const ratio = median(theirs.map(metric.pick)) / median(ours.map(metric.pick));
        const verdict =
          limit === undefined || !metric.cost ? '' : ratio <= limit ? ' yes |' : ' **no** |';
        rows.push(
          `| ${scenario} | ${c} | ${metric.label} | ${f1(median(ours.map(metric.pick)))} | ` +
            `${f1(median(theirs.map(metric.pick)))} | ${f2(ratio)}× | ` +
            `${f2(Math.min(...perRound))}–${f2(Math.max(...perRound))}× (${perRound.length}) |` +
            (limit === undefined ? '' : verdict === '' ? '  |' : verdict),
        );
      }
    }
  }
  const limitHead = limit === undefined ? '' : ` ≤ ${limit}× |`;
  const limitAlign = limit === undefined ? '' : ' :---: |';
  return `## ${vs} / ${base}

${limit === undefined ? 'No target: a reference.' : `Target: a cost ratio (CPU per decision) of at most ${limit}×.`}

| scenario | C | metric | ${base} | ${vs} | ratio of medians | per-round ratios (min–max, rounds) |${limitHead}
| --- | ---: | --- | ---: | ---: | ---: | ---: |${limitAlign}
${rows.join('\n')}
`;
}

const names = new Set(results.runs.map((r) => r.contender));
const pairs = values.pair ?? [
  'sluice:sluice-takeall3:1.5',
  ...(names.has('sluice-take3') ? ['sluice-take3:sluice-takeall3'] : []),
];
const tables = pairs.map((pair) => {
  const [base, vs, limit] = pair.split(':');
  if (base === undefined || vs === undefined || !names.has(base) || !names.has(vs)) {
    throw new Error(`--pair ${pair}: both contenders must be in ${dir}/results.json`);
  }
  return pairTable(base, vs, limit === undefined ? undefined : Number(limit));
});

const env = results.environment;
const text = `# Ratios between contenders

From \`${results.options.commandLine}\` (${env.date}, ${env.cpuCount} × ${env.cpuModel}, Node ${env.node}, Redis ${env.redis}, sluice ${env.git}${env.srcChangedDuringRun ? ', **src/ changed during the run**' : ''}).

Medians across rounds of each contender, the ratio of the medians (second / first), and the
spread of the per-round ratios: each round pairs the two runs of the same scenario and
concurrency (run back to back, the order rotated from round to round). Per decision: one
call of the contender's \`take(key)\` (see RESULTS.md for what each contender does).

${tables.join('\n')}`;
writeFileSync(`${dir}/RATIOS.md`, text);
process.stdout.write(text);
