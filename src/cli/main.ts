#!/usr/bin/env node
/**
 * The `sluice` command.
 *
 *   sluice demo [--json]   three replicas share one quota (see src/demo/run.ts)
 *   sluice bench [...]     the benchmark harness of a source checkout (bench/run.ts)
 *   sluice help
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { NoRedisError, runDemo } from '../demo/run.js';

const USAGE = `Usage: sluice <command> [options]

Commands:
  demo [--json]   start three API replicas that share one quota through Redis and show
                  that exactly 10 of 30 concurrent requests pass (REDIS_URL, or a private
                  redis-server on a free port). --json prints one JSON object.
  bench [...]     run the benchmark harness against rate-limiter-flexible, rate-limit-redis,
                  the seed's approach and a bare-socket floor (needs a source checkout with
                  its dev dependencies; options as in \`npm run bench -- --help\`)
  help            show this text

Exit status: 0 when every expectation held, 1 when one failed, 2 on a usage or setup error.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === 'demo') {
    let json = false;
    try {
      json =
        parseArgs({ args: rest, options: { json: { type: 'boolean' } }, strict: true }).values
          .json ?? false;
    } catch (error) {
      console.error(`sluice demo: ${(error as Error).message}\n\n${USAGE}`);
      return 2;
    }
    try {
      const report = await runDemo(json ? undefined : (line) => console.log(line));
      if (json) console.log(JSON.stringify(report, null, 2));
      return report.pass ? 0 : 1;
    } catch (error) {
      if (error instanceof NoRedisError) {
        console.error(error.message);
        return 2;
      }
      throw error;
    }
  }
  if (command === 'bench') return bench(rest);
  console.error(`sluice: unknown command "${command}"\n\n${USAGE}`);
  return 2;
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
