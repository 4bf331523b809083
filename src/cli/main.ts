#!/usr/bin/env node
/**
 * The `sluice` command.
 *
 *   sluice demo [--json]   three replicas share one quota (see src/demo/run.ts)
 *   sluice bench [...]     the benchmark harness of a source checkout (bench/run.ts)
 *   sluice help [command]  usage; `sluice <command> --help` too
 *   sluice --version       the package's version
 *
 * Exit status: 0 when every expectation held (or help/version was printed), 1 when one
 * failed, 2 on a usage or setup error.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { NoRedisError, runDemo } from '../demo/run.js';

const USAGE = `Usage: sluice <command> [options]

Commands:
  demo [--json]   start three API replicas that share one quota through Redis and show
                  that exactly 10 of 30 concurrent requests pass (REDIS_URL, or a private
                  redis-server on a free port). --json prints one JSON object.
  bench [...]     run the benchmark harness against rate-limiter-flexible, rate-limit-redis,
                  the seed's approach and a bare-socket floor (needs a source checkout with
                  its dev dependencies)
  help [command]  show this text, or a command's

Options:
  -h, --help      show this text (after a command: that command's usage)
  -v, --version   print the version

Exit status: 0 when every expectation held, 1 when one failed, 2 on a usage or setup error.`;

const DEMO_USAGE = `Usage: sluice demo [--json]

Starts three API replicas, as separate processes, each with its own Redis connection and
the limiter in front of POST /orders (10 per 1000 ms). Sends 30 concurrent requests for one
tenant and checks that exactly 10 pass, that a request passes again after the window, and
that cutting the path to Redis answers 503 with Retry-After: 1.

Redis: REDIS_URL when set (never stopped or flushed; each run uses a random tenant), else a
private redis-server on a free loopback port, stopped at the end.

Options:
  --json          print one JSON object (the report) instead of the narration
  -h, --help      show this text

Exit status: 0 when every expectation held, 1 when one failed, 2 on a usage or setup error.`;

const BENCH_USAGE = `Usage: sluice bench [options]

Runs bench/run.ts of the source checkout this command was built from (the harness and its
contenders are dev dependencies, not part of the package), passing the options through:

  --duration <ms>   --warmup <ms>   --rounds <n>   --quick
  --contenders <a,b>   --scenarios <a,b>   --concurrency <1,16>   --out <dir>
  -h, --help        show this text

\`npm run bench -- --help\` in the checkout describes each option and its default.

Exit status: the harness's; 2 on a usage error or outside a source checkout.`;

const COMMANDS: Record<string, string> = { demo: DEMO_USAGE, bench: BENCH_USAGE };

const HELP = { help: { type: 'boolean', short: 'h' } } as const;
const BENCH_OPTIONS = {
  ...HELP,
  duration: { type: 'string' },
  warmup: { type: 'string' },
  rounds: { type: 'string' },
  quick: { type: 'boolean' },
  contenders: { type: 'string' },
  scenarios: { type: 'string' },
  concurrency: { type: 'string' },
  out: { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

/** Parses `args` strictly; on an unknown option or a missing value, prints `usage` and returns 2. */
function parse<O extends NonNullable<ParseArgsConfig['options']>>(
  name: string,
  args: string[],
  options: O,
  usage: string,
) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    console.error(`${name}: ${(error as Error).message}\n\n${usage}`);
    return 2 as const;
  }
}

function version(): string {
  const manifest = new URL('../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined) {
    console.error(USAGE);
    return 2;
  }
  if (command === '--version' || command === '-v') {
    if (rest.length > 0) return usageError(`unexpected argument "${rest[0]}"`);
    console.log(version());
    return 0;
  }
  if (command === '--help' || command === '-h') {
    console.log(USAGE);
    return 0;
  }
  if (command === 'help') {
    const [topic, ...extra] = rest;
    if (extra.length > 0) return usageError(`unexpected argument "${extra[0]}"`);
    if (topic === undefined) {
      console.log(USAGE);
      return 0;
    }
    const usage = COMMANDS[topic];
    if (usage === undefined) return usageError(`unknown command "${topic}"`);
    console.log(usage);
    return 0;
  }
  if (command === 'demo') {
    const values = parse('sluice demo', rest, { ...HELP, json: { type: 'boolean' } }, DEMO_USAGE);
    if (values === 2) return 2;
    if (values.help) {
      console.log(DEMO_USAGE);
      return 0;
    }
    return demo(values.json ?? false);
  }
  if (command === 'bench') {
    const values = parse('sluice bench', rest, BENCH_OPTIONS, BENCH_USAGE);
    if (values === 2) return 2;
    if (values.help) {
      console.log(BENCH_USAGE);
      return 0;
    }
    return bench(rest);
  }
  return usageError(
    command.startsWith('-') ? `unknown option "${command}"` : `unknown command "${command}"`,
  );
}

function usageError(message: string): number {
  console.error(`sluice: ${message}\n\n${USAGE}`);
  return 2;
}

async function demo(json: boolean): Promise<number> {
  try {
    const report = await runDemo(json ? undefined : (line) => console.log(line));
    if (json) console.log(JSON.stringify(report, null, 2));
    return report.pass ? 0 : 1;
  } catch (error) {
    if (error instanceof NoRedisError) {
      console.error(error.message);
      // Scripts reading --json get an object whatever happened.
      if (json) console.log(JSON.stringify({ pass: false, error: error.message }, null, 2));
      return 2;
    }
    throw error;
  }
}

/** Runs bench/run.ts of the checkout this CLI was built from, passing the options through. */
function bench(args: string[]): number {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const entry = `${root}bench/run.ts`;
  if (!existsSync(entry)) {
    console.error(
      'sluice bench: the benchmark harness ships with the source repository, not the package.',
    );
    return 2;
  }
  const run = spawnSync(process.execPath, ['--import', 'tsx', entry, ...args], {
    cwd: root,
    stdio: 'inherit',
  });
  return run.status ?? 1;
}

process.exitCode = await main(process.argv.slice(2));
