#!/usr/bin/env node
/**
 * The `sluice` command.
 *
 *   sluice demo [--json]   three replicas share one quota (see src/demo/run.ts)
 *   sluice help
 */
import { parseArgs } from 'node:util';
import { NoRedisError, runDemo } from '../demo/run.js';

const USAGE = `Usage: sluice <command> [options]

Commands:
  demo [--json]   start three API replicas that share one quota through Redis and show
                  that exactly 10 of 30 concurrent requests pass (REDIS_URL, or a private
                  redis-server on a free port). --json prints one JSON object.
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
  console.error(`sluice: unknown command "${command}"\n\n${USAGE}`);
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
