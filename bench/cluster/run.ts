/**
 * The cluster benchmark: decisions/s and CPU per decision of sluice on a Redis Cluster of 3
 * primaries against one server, on this machine, at C callers in flight (default 256), on
 * random tenants; and the coalescer's batches grouped per node (as shipped), per slot, and
 * not at all. See variants.ts.
 *
 *   node --import tsx bench/cluster/run.ts [--rounds 3] [--duration 2000] [--warmup 500]
 *     [--concurrency 256] [--variants single,cluster-node,…] [--out bench/cluster]
 *
 * It starts its own servers (one redis-server, and a cluster of 3 primaries without
 * replicas, on loopback), flushes only those between runs and stops them by pid at the end.
 * Each run is a fresh child process (child.ts); the rounds interleave the variants, their
 * order rotated. Writes RESULTS.md and results.json in --out.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { type RedisCluster, startRedisCluster } from '../../test/helpers/topology.js';
import { describeEnvironment, type Environment, sourceState } from '../environment.js';
import type { ChildMeasurement } from '../types.js';
import type { ChildConfig, ChildMessage } from './child.js';
import { type Targets, variantNames, variants } from './variants.js';

const CHILD = new URL('./child.ts', import.meta.url);
const SLACK_MS = 60_000;

interface Snapshot {
  cpuUs: number;
  scriptCalls: number;
  crossSlot: number;
}

export interface Run {
  readonly round: number;
  readonly variant: string;
  readonly concurrency: number;
  readonly measurement: ChildMeasurement;
  readonly decisionsPerSec: number;
  readonly nodeCpuUsPerDecision: number;
  readonly redisCpuUsPerDecision: number;
  /** EVAL/EVALSHA calls (round trips) per decision, over every server of the run. */
  readonly scriptCallsPerDecision: number;
  /** Script calls refused with CROSSSLOT, per decision. */
  readonly crossSlotPerDecision: number;
  /** The machine's 1-minute load average when the run started (2 cores: above 2 is contention). */
  readonly loadAverage: number;
}

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '500' },
    concurrency: { type: 'string', default: '256' },
    variants: { type: 'string', default: variantNames.join(',') },
    out: { type: 'string', default: new URL('.', import.meta.url).pathname },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(
    `Usage: node --import tsx bench/cluster/run.ts [--rounds 3] [--duration 2000] [--warmup 500] [--concurrency 256] [--variants ${variantNames.join(',')}] [--out dir]`,
  );
  process.exit(0);
}
const rounds = Number(values.rounds);
const durationMs = Number(values.duration);
const warmupMs = Number(values.warmup);
const concurrency = Number(values.concurrency);
const chosen = values.variants.split(',').filter((v) => v !== '');
for (const name of chosen) {
  if (variants[name] === undefined) throw new Error(`unknown variant ${name} (${variantNames})`);
}

/** One command on one of this run's servers, by port (a fresh connection each time). */
async function command(port: number, args: string[]): Promise<string> {
  const { createClient } = await import('redis');
  const client = createClient({ url: `redis://127.0.0.1:${port}` });
  client.on('error', () => {});
  await client.connect();
  try {
    return String(await client.sendCommand(args));
  } finally {
    client.destroy();
  }
}

async function snapshot(ports: readonly number[]): Promise<Snapshot> {
  const total: Snapshot = { cpuUs: 0, scriptCalls: 0, crossSlot: 0 };
  for (const port of ports) {
    const text = await command(port, ['INFO', 'everything']);
    const num = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
    total.cpuUs += (num(/^used_cpu_sys:([\d.]+)/m) + num(/^used_cpu_user:([\d.]+)/m)) * 1e6;
    total.scriptCalls += num(/^cmdstat_evalsha:calls=(\d+)/m) + num(/^cmdstat_eval:calls=(\d+)/m);
    total.crossSlot += num(/^errorstat_CROSSSLOT:count=(\d+)/m);
  }
  return total;
}

function expect(child: ChildProcess, type: ChildMessage['type'], ms: number) {
  return new Promise<ChildMessage>((resolve, reject) => {
    const cleanup = () => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    const onMessage = (message: ChildMessage) => {
      if (message.type === 'failed') {
        cleanup();
        reject(new Error(`child failed: ${message.message}`));
      } else if (message.type === type) {
        cleanup();
        resolve(message);
      }
    };
    const onExit = (code: number | null) => {
      cleanup();
      reject(new Error(`child exited (${code}) before "${type}"`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no "${type}" within ${ms} ms`));
    }, ms);
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}

async function measure(
  round: number,
  variant: string,
  targets: Targets,
  ports: readonly number[],
): Promise<Run> {
  // Every run starts from an empty keyspace, on this benchmark's own servers only.
  for (const port of ports) await command(port, ['FLUSHALL']);
  const loadAverage = os.loadavg()[0] ?? 0;
  const config: ChildConfig = { variant, concurrency, durationMs, warmupMs, targets };
  const child = fork(CHILD, [JSON.stringify(config)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  try {
    await expect(child, 'ready', warmupMs + SLACK_MS);
    const before = await snapshot(ports);
    const result = expect(child, 'result', durationMs + SLACK_MS);
    child.send({ type: 'go' });
    const message = await result;
    const after = await snapshot(ports);
    if (message.type !== 'result') throw new Error('no result');
    child.send({ type: 'finish' });
    const m = message.measurement;
    const per = (x: number) => (m.decisions === 0 ? 0 : x / m.decisions);
    return {
      round,
      variant,
      concurrency,
      measurement: m,
      decisionsPerSec: (m.decisions / m.elapsedMs) * 1000,
      nodeCpuUsPerDecision: per(m.nodeCpuUs),
      redisCpuUsPerDecision: per(after.cpuUs - before.cpuUs),
      scriptCallsPerDecision: per(after.scriptCalls - before.scriptCalls),
      crossSlotPerDecision: per(after.crossSlot - before.crossSlot),
      loadAverage,
    };
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1
    ? (s[mid] as number)
    : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

interface Summary {
  readonly variant: string;
  readonly decisionsPerSec: { median: number; min: number; max: number };
  readonly p99Us: number;
  readonly nodeCpuUsPerDecision: number;
  readonly redisCpuUsPerDecision: number;
  readonly scriptCallsPerDecision: number;
  readonly crossSlotPerDecision: number;
  readonly errors: number;
  /** Median decisions/s ÷ single's median; and the same per round, min–max. */
  readonly vsSingle: { median: number; min: number; max: number } | undefined;
}

function summarize(runs: Run[]): Summary[] {
  const single = runs.filter((r) => r.variant === 'single');
  return chosen.map((variant) => {
    const mine = runs.filter((r) => r.variant === variant);
    const rates = mine.map((r) => r.decisionsPerSec);
    const perRound = mine
      .map((r) => {
        const ref = single.find((s) => s.round === r.round);
        return ref === undefined ? undefined : r.decisionsPerSec / ref.decisionsPerSec;
      })
      .filter((x): x is number => x !== undefined);
    const singleMedian = median(single.map((r) => r.decisionsPerSec));
    return {
      variant,
      decisionsPerSec: { median: median(rates), min: Math.min(...rates), max: Math.max(...rates) },
      p99Us: median(mine.map((r) => r.measurement.p99Us)),
      nodeCpuUsPerDecision: median(mine.map((r) => r.nodeCpuUsPerDecision)),
      redisCpuUsPerDecision: median(mine.map((r) => r.redisCpuUsPerDecision)),
      scriptCallsPerDecision: median(mine.map((r) => r.scriptCallsPerDecision)),
      crossSlotPerDecision: median(mine.map((r) => r.crossSlotPerDecision)),
      errors: mine.reduce((sum, r) => sum + r.measurement.errors, 0),
      vsSingle:
        single.length === 0
          ? undefined
          : {
              median: median(rates) / singleMedian,
              min: Math.min(...perRound),
              max: Math.max(...perRound),
            },
    };
  });
}

const fmt = (x: number, digits = 0) =>
  x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

function report(runs: Run[], summaries: Summary[], env: Environment, seconds: number): string {
  const lines = [
    '# sluice on Redis Cluster: benchmark results',
    '',
    'What the figures mean: [README.md](README.md).',
    '',
    `Generated ${env.date} by \`node --import tsx bench/cluster/run.ts\` in ${Math.round(seconds)} s (${rounds} rounds, ${durationMs} ms runs after ${warmupMs} ms warm-up, C=${concurrency}). Numbers from one small machine: compare the variants with each other.`,
    '',
    '## Machine',
    '',
    '|  | value |',
    '| --- | --- |',
    `| CPU | ${env.cpuModel} × ${env.cpuCount} |`,
    `| OS | ${env.os} |`,
    `| Node.js | ${env.node} |`,
    `| Redis | ${env.redis} (private servers on loopback, --save '' --appendonly no) |`,
    `| sluice | ${env.packages.sluice} at ${env.git}, src/ fingerprint ${env.srcFingerprint}${env.srcChangedDuringRun ? ' (src/ CHANGED during the run)' : ''} |`,
    `| redis (node-redis) | ${env.packages.redis} |`,
    '',
    '## Method',
    '',
    '- Servers: one `redis-server`, and a Redis Cluster of 3 primaries without replicas (`redis-cli --cluster create … --cluster-replicas 0`), all on this 2-core machine: the cluster’s 3 primaries and the single server share the same 2 cores with the client process.',
    '- Each run is a fresh child process (`bench/cluster/child.ts`): it first checks the variant decides exactly (24 tenants spread over the nodes × 30 concurrent takes, limit 10 → exactly 10 each), warms up, then runs a closed loop of C workers on uniform random tenants out of 1e6 (limit 1000 / 60 s: nearly every take admitted and writing a key) for the measured span. Every server is flushed before each run (this benchmark’s own servers only).',
    '- Load avg: the machine’s 1-minute load average as each run started (other work on the 2 cores adds noise; the rounds interleave the variants so each round’s ratios compare runs made close together).',
    '- Node CPU: `process.cpuUsage()` of the child over the measured span. Redis CPU: `used_cpu_sys + used_cpu_user` deltas summed over every server of the run (the 3 primaries for the cluster). Script calls: `EVAL`/`EVALSHA` calls (round trips) per decision; CROSSSLOT: script calls the cluster refused before running them, per decision. All per settled decision; medians over rounds, spread = min–max.',
    '- Variants:',
    ...chosen.map((v) => `  - \`${v}\`: ${variants[v]?.description}`),
    '',
    '## Summary (medians)',
    '',
    '| variant | decisions/s (min–max) | ÷ single (per round min–max) | p99 | Node CPU/dec | Redis CPU/dec | script calls/dec | CROSSSLOT/dec | errors |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...summaries.map(
      (s) =>
        `| \`${s.variant}\` | ${fmt(s.decisionsPerSec.median)} (${fmt(s.decisionsPerSec.min)}–${fmt(s.decisionsPerSec.max)}) | ${s.vsSingle === undefined ? '—' : `${fmt(s.vsSingle.median, 2)}× (${fmt(s.vsSingle.min, 2)}–${fmt(s.vsSingle.max, 2)})`} | ${fmt(s.p99Us / 1000, 1)} ms | ${fmt(s.nodeCpuUsPerDecision, 1)} µs | ${fmt(s.redisCpuUsPerDecision, 1)} µs | ${fmt(s.scriptCallsPerDecision, 3)} | ${fmt(s.crossSlotPerDecision, 3)} | ${s.errors} |`,
    ),
    '',
    '## Every run',
    '',
    '| round | variant | decisions/s | p50 | p99 | Node CPU/dec | Redis CPU/dec | script calls/dec | CROSSSLOT/dec | errors | load avg |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...runs.map(
      (r) =>
        `| ${r.round} | \`${r.variant}\` | ${fmt(r.decisionsPerSec)} | ${fmt(r.measurement.p50Us / 1000, 2)} ms | ${fmt(r.measurement.p99Us / 1000, 1)} ms | ${fmt(r.nodeCpuUsPerDecision, 1)} µs | ${fmt(r.redisCpuUsPerDecision, 1)} µs | ${fmt(r.scriptCallsPerDecision, 3)} | ${fmt(r.crossSlotPerDecision, 3)} | ${r.measurement.errors}${r.measurement.firstError ? ` (${r.measurement.firstError})` : ''} | ${fmt(r.loadAverage, 1)} |`,
    ),
    '',
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  const started = performance.now();
  const source = sourceState();
  let single: PrivateRedis | undefined;
  let cluster: RedisCluster | undefined;
  const stop = async () => {
    await single?.stop();
    await cluster?.stop();
  };
  process.once('SIGINT', () => {
    void stop().finally(() => process.exit(130));
  });
  try {
    single = await startRedisServer();
    cluster = await startRedisCluster({ replicas: 0 });
    const targets: Targets = { single: single.url, cluster: cluster.rootNodes.map((n) => n.url) };
    const primaryPorts = cluster.primaries.map((p) => p.port);
    const runs: Run[] = [];
    for (let round = 1; round <= rounds; round++) {
      const order = chosen.map((_, i) => chosen[(i + round - 1) % chosen.length] as string);
      for (const variant of order) {
        const ports = variants[variant]?.cluster ? primaryPorts : [single.port];
        const run = await measure(round, variant, targets, ports);
        runs.push(run);
        console.log(
          `round ${round} ${variant}: ${fmt(run.decisionsPerSec)}/s, Node ${fmt(run.nodeCpuUsPerDecision, 1)} µs/dec, Redis ${fmt(run.redisCpuUsPerDecision, 1)} µs/dec, ${fmt(run.scriptCallsPerDecision, 3)} scripts/dec, ${fmt(run.crossSlotPerDecision, 3)} CROSSSLOT/dec, ${run.measurement.errors} errors`,
        );
      }
    }
    const version = /redis_version:(\S+)/.exec(await command(single.port, ['INFO', 'server']))?.[1];
    const env = describeEnvironment(version ?? 'unknown', source);
    const summaries = summarize(runs);
    const seconds = (performance.now() - started) / 1000;
    const out = values.out.endsWith('/') ? values.out : `${values.out}/`;
    mkdirSync(out, { recursive: true });
    writeFileSync(`${out}results.json`, `${JSON.stringify({ env, summaries, runs }, null, 2)}\n`);
    writeFileSync(`${out}RESULTS.md`, report(runs, summaries, env, seconds));
    console.log(`wrote ${out}RESULTS.md`);
  } finally {
    await stop();
  }
}

await main();
