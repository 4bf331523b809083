/**
 * The benchmark harness's entry: `node --import tsx bench/run.ts [options]`.
 *
 * Starts a private redis-server on a free loopback port, checks every contender's
 * correctness, measures the server limit with redis-benchmark, then runs every contender in
 * interleaved rounds (one fresh child process per run) and writes bench/results.json,
 * bench/RESULTS.md and bench/results.svg. Progress goes to stderr. The server is stopped by
 * its pid at the end, or on Ctrl-C.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createClient } from 'redis';
import { loadScript } from '../src/algorithms/script.js';
import { type PrivateRedis, startRedisServer } from '../src/demo/redis-server.js';
import { type CheckResult, checkContender } from './check.js';
import { assertBuildFresh } from './contenders/build.js';
import { contenderNames, defaultContenderNames, loadContender } from './contenders/index.js';
import { describeEnvironment, sourceState } from './environment.js';
import { formatJson } from './json.js';
import { measureInChild } from './measure.js';
import { type BenchResults, type RunFailure, renderMarkdown, summarize } from './report.js';
import { getScenario, scenarioNames } from './scenarios.js';
import { measureScriptTimes, type ScriptTimeResult } from './script-time.js';
import { runServerLimit, SERVER_LIMIT_CASES, type ServerLimit } from './server-limit.js';
import { renderChart } from './svg.js';
import type { RunConfig, RunResult } from './types.js';

const USAGE = `Usage: node --import tsx bench/run.ts [options]

  --duration <ms>        measured span of each run (default 2000; --quick: 1000)
  --warmup <ms>          warm-up before each measured span (default 500; --quick: 300)
  --rounds <n>           interleaved rounds, >= 1 (default 3; --quick: 1)
  --quick                one round, 1 s runs, C=256 only; writes to <tmpdir>/sluice-bench-quick
  --contenders <a,b>     any of: ${contenderNames.join(', ')}
                         (default: ${defaultContenderNames.join(', ')})
  --scenarios <a,b>      subset of: ${scenarioNames.join(', ')}
  --concurrency <1,16>   closed-loop workers per run (default 1,16,256; --quick: 256)
  --out <dir>            where to write RESULTS.md, results.json, results.svg (default bench/)
  -h, --help             this text`;

interface Options {
  durationMs: number;
  warmupMs: number;
  rounds: number;
  contenders: string[];
  scenarios: string[];
  concurrency: number[];
  outDir: URL;
}

function positiveInt(flag: string, text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${flag} must be a positive integer`);
  return n;
}

function list(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

function parseOptions(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      rounds: { type: 'string' },
      quick: { type: 'boolean', default: false },
      contenders: { type: 'string' },
      scenarios: { type: 'string' },
      concurrency: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return undefined;
  const quick = values.quick;
  const contenders =
    values.contenders === undefined ? defaultContenderNames : list(values.contenders);
  for (const name of contenders) {
    if (!contenderNames.includes(name)) throw new Error(`unknown contender "${name}"`);
  }
  const scenarios = values.scenarios === undefined ? scenarioNames : list(values.scenarios);
  for (const name of scenarios) getScenario(name);
  // A quick run does not replace the committed 3-round results: it writes to a temporary
  // folder unless told otherwise.
  const outDir =
    values.out !== undefined
      ? pathToFileURL(`${resolve(values.out)}/`)
      : quick
        ? pathToFileURL(`${join(tmpdir(), 'sluice-bench-quick')}/`)
        : new URL('./', import.meta.url);
  return {
    durationMs: positiveInt('--duration', values.duration ?? (quick ? '1000' : '2000')),
    warmupMs: positiveInt('--warmup', values.warmup ?? (quick ? '300' : '500')),
    rounds: positiveInt('--rounds', values.rounds ?? (quick ? '1' : '3')),
    contenders,
    scenarios,
    concurrency: list(values.concurrency ?? (quick ? '256' : '1,16,256')).map((c) =>
      positiveInt('--concurrency', c),
    ),
    outDir,
  };
}

function progress(text: string): void {
  process.stderr.write(text);
}

/** Whether `scenario` runs at `concurrency` (a scenario may name the ones it runs at). */
function runsAt(scenario: string, concurrency: number): boolean {
  const only = getScenario(scenario).concurrency;
  return only === undefined || only.includes(concurrency);
}

/** Rotates `items` left by `by` places. */
function rotate<T>(items: readonly T[], by: number): T[] {
  const k = items.length === 0 ? 0 : by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

async function main(): Promise<number> {
  let options: Options | undefined;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}\n`);
    return 2;
  }
  if (options === undefined) {
    console.log(USAGE);
    return 0;
  }
  try {
    await assertBuildFresh();
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  const started = performance.now();
  const sourceAtStart = sourceState();
  const commandLine = ['node --import tsx bench/run.ts', ...process.argv.slice(2)].join(' ');
  const cells = options.scenarios.flatMap((scenario) =>
    options.concurrency.filter((c) => runsAt(scenario, c)),
  );
  const runsTotal = options.rounds * cells.length * options.contenders.length;
  const estimateSec = Math.round(
    (runsTotal * (options.durationMs + options.warmupMs + 500)) / 1000 + 15,
  );
  progress(`sluice bench: ${runsTotal} runs, about ${estimateSec} s\n`);

  let redis: PrivateRedis | undefined;
  const stopRedis = async () => {
    const server = redis;
    redis = undefined;
    await server?.stop();
  };
  const onSignal = (signal: NodeJS.Signals) => {
    progress(`\n${signal}: stopping the private redis-server\n`);
    const exit = () => process.exit(130);
    stopRedis().then(exit, exit);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    redis = await startRedisServer();
    progress(`private redis-server pid ${redis.pid} on ${redis.url}\n`);
    const admin = createClient({
      url: redis.url,
      disableOfflineQueue: true,
      socket: { reconnectStrategy: false },
    });
    admin.on('error', (error: Error) => progress(`admin connection: ${error.message}\n`));
    await admin.connect();
    try {
      const info = String(await admin.sendCommand(['INFO', 'server']));
      const redisVersion = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';

      // 1. Correctness gate.
      const checks: CheckResult[] = [];
      for (const name of options.contenders) {
        const check = await checkContender(name, redis.url);
        checks.push(check);
        progress(
          `check ${name}: ${check.allowed}/30 allowed, ${check.errors} errors → ${check.pass ? 'pass' : 'FAIL'}\n`,
        );
      }

      // 2. Server limit: sluice's script straight from redis-benchmark.
      const script = loadScript(
        'fixed-window',
        new URL('../src/algorithms/', import.meta.url).href,
        1,
      );
      const sha = String(await admin.sendCommand(['SCRIPT', 'LOAD', script.source]));
      const serverLimits: ServerLimit[] = [];
      for (const testCase of SERVER_LIMIT_CASES) {
        progress(`server limit (${testCase.label}) … `);
        const limit = await runServerLimit(redis.port, sha, testCase);
        serverLimits.push(limit);
        progress(`${Math.round(limit.requestsPerSec).toLocaleString('en-US')} requests/s\n`);
      }

      // 3. The longest script call per policy at its worst accepted parameters.
      progress('longest script call per policy … ');
      const scriptTimes: ScriptTimeResult[] = await measureScriptTimes(redis.url, 3);
      progress(
        `heaviest call ${Math.max(...scriptTimes.map((t) => t.cpuUs))} µs of CPU at most; ` +
          `longest call ${Math.max(...scriptTimes.flatMap((t) => t.rounds))} µs of wall time\n`,
      );
      await admin.sendCommand(['FLUSHDB']); // the private server's own keys, before the runs

      // 4. Interleaved measured runs.
      const runs: RunResult[] = [];
      const failures: RunFailure[] = [];
      let index = 0;
      for (let round = 1; round <= options.rounds; round++) {
        const order = rotate(options.contenders, round - 1);
        for (const scenario of options.scenarios) {
          for (const concurrency of options.concurrency) {
            if (!runsAt(scenario, concurrency)) continue;
            for (const contender of order) {
              index++;
              progress(
                `[${index}/${runsTotal}] round ${round} ${contender} ${scenario} C=${concurrency} … `,
              );
              const config: RunConfig = {
                contender,
                scenario,
                concurrency,
                durationMs: options.durationMs,
                warmupMs: options.warmupMs,
                redisUrl: redis.url,
              };
              try {
                const { child, redis: server } = await measureInChild(config, admin);
                const perDecision = (n: number) =>
                  child.decisions === 0 ? 0 : n / child.decisions;
                const run: RunResult = {
                  round,
                  contender,
                  scenario,
                  concurrency,
                  ...child,
                  decisionsPerSec: child.decisions / (child.elapsedMs / 1000),
                  nodeCpuUsPerDecision: perDecision(child.nodeCpuUs),
                  redisCpuUsPerDecision: perDecision(server.cpuUs),
                  redisCommandsPerDecision: perDecision(server.calls),
                  scriptCallsPerDecision: perDecision(server.scriptCalls),
                };
                runs.push(run);
                progress(
                  `${Math.round(run.decisionsPerSec).toLocaleString('en-US')}/s, p99 ${run.p99Us} µs` +
                    `${run.errors > 0 ? `, ${run.errors} errors` : ''}\n`,
                );
              } catch (error) {
                const message = error instanceof Error ? error.message : String(error);
                failures.push({ round, contender, scenario, concurrency, message });
                progress(`FAILED: ${message}\n`);
              }
            }
          }
        }
      }

      // 5. Reports.
      const contenderDescriptions: Record<string, string> = {};
      for (const name of options.contenders) {
        contenderDescriptions[name] = (await loadContender(name)).description;
      }
      const results: BenchResults = {
        environment: describeEnvironment(redisVersion, sourceAtStart),
        options: {
          commandLine,
          durationMs: options.durationMs,
          warmupMs: options.warmupMs,
          rounds: options.rounds,
          contenders: options.contenders,
          scenarios: options.scenarios,
          concurrency: options.concurrency,
        },
        contenderDescriptions,
        scenarioDescriptions: Object.fromEntries(
          options.scenarios.map((s) => [s, getScenario(s).description]),
        ),
        checks,
        serverLimits,
        scriptTimes,
        runs,
        failures,
        wallClockSec: (performance.now() - started) / 1000,
      };
      if (results.environment.srcChangedDuringRun) {
        progress('warning: src/ changed during the run; the runs mix source versions\n');
      }
      writeReports(results, options.outDir);
      return checks.every((c) => c.pass) && failures.length === 0 ? 0 : 1;
    } finally {
      await admin.close();
    }
  } finally {
    await stopRedis();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function writeReports(results: BenchResults, outDir: URL): void {
  const summary = summarize(results);
  // The chart: C=256 random keys, else the highest concurrency of the first scenario.
  const scenario = results.options.scenarios.includes('random')
    ? 'random'
    : (results.options.scenarios[0] ?? 'random');
  const concurrency = results.options.concurrency.includes(256)
    ? 256
    : Math.max(...results.options.concurrency);
  const chartRows = summary
    .filter((r) => r.scenario === scenario && r.concurrency === concurrency)
    .map((r) => ({ name: r.contender, decisionsPerSec: r.decisionsPerSec, p99Us: r.p99Us }));
  const files = {
    'results.json': formatJson(results),
    'RESULTS.md': renderMarkdown(results),
    'results.svg': renderChart(`${scenario} keys, C=${concurrency}`, chartRows),
  };
  mkdirSync(outDir, { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    const url = new URL(name, outDir);
    writeFileSync(url, text);
    progress(`wrote ${fileURLToPath(url)}\n`);
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    progress(`\n${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
