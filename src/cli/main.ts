#!/usr/bin/env node
/**
 * The `sluice` command (arguments parsed by commander).
 *
 *   sluice demo [--json]                 three replicas share one quota (src/demo/run.ts)
 *   sluice bench [...]                   the benchmark harness of a source checkout
 *   sluice inspect --config F --route R --tenant T [--user U]
 *                                        each limit's units left, would-be decision, key, PTTL (reads only)
 *   sluice reset --config F --route R --tenant T [--user U [--include-shared]] [--policy N] [--yes]
 *                                        deletes exactly that scope's state, once confirmed
 *   sluice stats [--namespace N]         live keys per namespace and algorithm, memory, eviction
 *   sluice check-config FILE             validates a policy file, every problem with its path
 *   sluice serve [--config DIR|FILE] [--grpc-port N] [--http-port N] [--compat reference] [...]
 *                                        Envoy's global rate limit service (src/serve/, docs/serve.md)
 *   sluice help [command], --help, --version
 *
 * Exit status: 0 ok; 1 a check failed or the input is invalid; 2 a usage or setup error
 * (Redis unreachable). `--json` prints one JSON object on stdout, also on failure.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { CliError, DEFAULT_URL, EXIT, readJsonText } from './exit.js';
import type { InspectOptions } from './inspect.js';
import { escapeControls, print, printError, printJson } from './output.js';
import type { ResetOptions } from './reset.js';
import type { ServeOptions } from './serve.js';
import type { StatsOptions } from './stats.js';

// Each command's module (and the Redis client under it) is loaded when the command runs:
// help, version and usage errors answer at once.

const EXIT_STATUS = `
Exit status:
  0  ok
  1  a check failed (demo, check-config) or the input is invalid (a policy file, a route or
     policy the file does not have, a reset answered other than yes)
  2  a usage error (unknown command or option, missing argument, reset without a terminal
     and without --yes, --user missing, or given to reset on a route with no limit per
     user) or a setup error (Redis unreachable or failing, a file that cannot be read)`;

const REDIS_HELP = `
Redis: --url, else REDIS_URL, else ${DEFAULT_URL}. Keys are those of
--namespace (default "rate"): the namespace your RateLimiter uses.`;

const DEMO_HELP = `
Starts three API replicas, as separate processes, each with its own Redis connection and
the limiter in front of POST /orders (10 per 1000 ms). Sends 30 concurrent requests for one
tenant and checks that exactly 10 pass, that a request passes again after the window, and
that cutting the path to Redis answers 503 with Retry-After: 1.

Redis: REDIS_URL when set (never stopped or flushed; each run uses a random tenant), else a
private redis-server on a free loopback port, stopped at the end.

Exit status: 0 when every expectation held, 1 when one failed, 2 on a usage or setup error.`;

const BENCH_HELP = `
Runs bench/run.ts of the source checkout this command was built from (the harness and its
contenders are dev dependencies, not part of the package), passing the options through.
\`npm run bench -- --help\` in the checkout describes each option and its default.

Exit status: the harness's; 2 on a usage error or outside a source checkout.`;

const INSPECT_HELP = `
For each limit of the route for that tenant — its own override, else its plan's (its own
plan, else defaultPlan), else the route's, exactly as the route's guard decides — prints
the units left now and when the scope is clean again ("no state: a fresh quota" when it
has none), whether a take of --cost would be admitted now (limiter.peek: consumes nothing,
writes nothing), the Redis key of the limit's scope and the key's PTTL. Limits counted per
user need --user.
${REDIS_HELP}

Example:
  sluice inspect --config policies.json --route POST/orders --tenant acme --user ann
${EXIT_STATUS}`;

const RESET_HELP = `
Deletes the state of the route's limits for that tenant (and user), each limit's one key
with limiter.reset — never a pattern, never FLUSHDB — after showing the keys, and the limits
it leaves as they are, and asking for "yes" on the terminal; without a terminal it refuses
unless --yes is given.

Which limits:
  --user U                  only the limits counted per user ("user", "route-user") for U;
                            the limits U shares with the tenant's other users are left
  --user U --include-shared those, and the limits counted per route and per tenant
  without --user            the limits counted per route and per tenant; the per-user ones
                            are left (each user has a key of their own, and finding every
                            user's would take a scan of the keyspace, which reset never does)
  --policy NAME             only that limit, among those (repeatable)
--user on a route with no limit counted per user is a usage error (exit 2), as is a
--policy the other options leave out.

A limit counted per tenant or per user is shared with the other routes that list it:
resetting it resets it for them too. Every limiter on the namespace stops answering cached
denials for the reset keys within 750 ms.
${REDIS_HELP}

Examples:
  sluice reset --config policies.json --route POST/orders --tenant acme --user ann
  sluice reset --config policies.json --route POST/orders --tenant acme --policy orders-burst
${EXIT_STATUS}`;

const STATS_HELP = `
Counts the live sluice keys (scheme v2: <namespace>:{<tenant hash>}:<tag>.<policy digest>…)
per namespace and algorithm, and distinct tenants, with SCAN … COUNT (never KEYS) — all
namespaces, or only --namespace (a concurrency policy's keys are its lease sets). Every key
scanned is counted once, by kind (the namespaces' keys, their reset epochs, blocks of scopes
(<key>:b), records of retry-safe operations (…:id:…) and of reservations (…:rsv:…), keys of
an algorithm tag this version does not read, other
namespaces' keys under --namespace, keys that are not sluice's): the kinds add up to the
keys scanned. Progress goes to stderr once the scan takes more than a
second; after --max-seconds the scan stops and the counts are reported as partial. Also
shows the server's version and role, used memory, maxmemory and maxmemory-policy, with a
warning when that policy can evict quota keys (allkeys-* and volatile-*: every sluice key
has a TTL; noeviction is the safe one).

Redis: --url, else REDIS_URL, else ${DEFAULT_URL}.
${EXIT_STATUS}`;

const CHECK_HELP = `
Validates a policy file (format 1 or 2) exactly as loadPolicies does. Valid: exit 0 and a
summary of its routes, named policies, plans and tenants. Invalid: exit 1 and every problem,
each with its path in the file (routes["POST/orders"].policy[1].limit, tenants.acme.plan).
${EXIT_STATUS}`;

const SERVE_HELP = `
Serves Envoy's global rate limit service (envoy.service.ratelimit.v3.RateLimitService) over
gRPC, decided by sluice on Redis: a drop-in for envoyproxy/ratelimit that reads its YAML
configuration (every file of --config, else RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/
RUNTIME_APPDIRECTORY) and its environment (SHADOW_MODE, LIMIT_RESPONSE_HEADERS_ENABLED,
MERGE_DOMAIN_CONFIG, CACHE_KEY_PREFIX, …), reloading the files when they change. HTTP:
GET /healthcheck, POST /json, GET /metrics. Runs until SIGTERM/SIGINT, then stops accepting
calls, finishes those in flight and closes Redis. See docs/serve.md.

Redis: --redis-url, else REDIS_URL (host:port or a redis:// URL; CLUSTER: nodes separated by
commas; SENTINEL: name,host:port,…), else 127.0.0.1:6379; --redis-type, else REDIS_TYPE
(SINGLE, CLUSTER, SENTINEL), else SINGLE. Ports: --grpc-port, else GRPC_PORT, else 8081;
--http-port, else PORT, else 8080.

Exit status: 0 after a graceful shutdown; 2 on a usage or setup error (Redis unreachable, a
port in use, a missing peer dependency).`;

function version(): string {
  const manifest = new URL('../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

function integer(max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1 || n > max) {
      throw new InvalidArgumentError(`an integer from 1 to ${max.toLocaleString('en-US')}`);
    }
    return n;
  };
}

function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > 86_400) {
    throw new InvalidArgumentError('a number of seconds above 0 (at most 86400)');
  }
  return n;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** Options every Redis command takes. */
function redisOptions(command: Command, namespace = true): Command {
  command.option('--url <url>', `Redis URL (default: REDIS_URL, else ${DEFAULT_URL})`);
  if (namespace) command.option('--namespace <name>', 'the limiter’s namespace', 'rate');
  return command.option('--json', 'print one JSON object (for scripts)');
}

/** What a command's action leaves for `main`: its exit status, and whether it answers in JSON. */
interface Result {
  code: number;
  json: boolean;
}

/** Wraps a command's action so that it stores its exit status (and `--json`) in `result`. */
type Runner = <A extends unknown[]>(
  action: (...args: A) => Promise<number> | number,
) => (...args: A) => Promise<void>;

function runner(result: Result): Runner {
  return (action) =>
    async (...args) => {
      const options = args.find(
        (a) => typeof a === 'object' && a !== null && !(a instanceof Command),
      );
      result.json = (options as { json?: boolean } | undefined)?.json === true;
      result.code = await action(...args);
    };
}

/**
 * A parsing error as commander words it (`error: unknown option '--x'`, an option's invalid
 * value), its control characters escaped but for the line break before a suggestion of ours.
 */
function commanderError(text: string): string {
  const message = text.replace(/\n$/, '');
  const suggestion = /\n\(Did you mean [^\n]*\?\)$/.exec(message);
  const given = suggestion === null ? message : message.slice(0, suggestion.index);
  return `${escapeControls(given)}${suggestion?.[0] ?? ''}\n`;
}

/** Builds the program; actions store their exit status in `result.code`. */
function program(argv: readonly string[], result: Result): Command {
  const run = runner(result);
  const sluice = new Command('sluice')
    .usage('<command> [options]')
    .description(
      'Distributed rate limiting on Redis: the demo, operators’ tools, the benchmark, the Envoy rate limit service.',
    )
    .version(version(), '-v, --version', 'print the version')
    .helpOption('-h, --help', 'show this text (after a command: that command’s usage)')
    .helpCommand('help [command]', 'show this text, or a command’s')
    .exitOverride()
    .configureOutput({ outputError: (text, write) => write(commanderError(text)) })
    .showHelpAfterError()
    .addHelpText(
      'after',
      `
Every command takes --help; all but bench and serve take --json (one JSON object on stdout, also
on failure); inspect, reset and stats take --url (else REDIS_URL, else
${DEFAULT_URL}).
${EXIT_STATUS}`,
    );
  addDemo(sluice, run);
  addBench(sluice, run, argv);
  addInspect(sluice, run);
  addReset(sluice, run);
  addStats(sluice, run);
  addCheckConfig(sluice, run);
  addServe(sluice, run);
  return sluice;
}

function addDemo(sluice: Command, run: Runner): void {
  sluice
    .command('demo')
    .description(
      'three API replicas share one quota through Redis: exactly 10 of 30 concurrent requests pass',
    )
    .option('--json', 'print one JSON object (the report) instead of the narration')
    .addHelpText('after', DEMO_HELP)
    .action(run((options: { json?: boolean }) => demo(options.json === true)));
}

function addBench(sluice: Command, run: Runner, argv: readonly string[]): void {
  sluice
    .command('bench')
    .description('the benchmark harness against other limiters (needs a source checkout)')
    .option('--duration <ms>', 'measured time per run')
    .option('--warmup <ms>', 'warm-up time per run')
    .option('--rounds <n>', 'rounds, interleaved')
    .option('--quick', 'a short run')
    .option('--contenders <a,b>', 'which contenders')
    .option('--scenarios <a,b>', 'which scenarios')
    .option('--concurrency <1,16>', 'callers in flight')
    .option('--out <dir>', 'where RESULTS.md and the SVG go')
    .addHelpText('after', BENCH_HELP)
    .action(run(() => bench(argv.slice(argv.indexOf('bench') + 1))));
}

/** `--config`, `--route`, `--tenant` and `--user`: the scope `inspect` and `reset` act on. */
function scopeOptions(command: Command): Command {
  return command
    .requiredOption('--config <file>', 'the policy file (JSON)')
    .requiredOption('--route <route>', 'the route template, e.g. POST/orders')
    .requiredOption('--tenant <tenant>', 'the tenant id')
    .option('--user <user>', 'the user id (for limits counted per user)');
}

function addInspect(sluice: Command, run: Runner): void {
  redisOptions(
    scopeOptions(
      sluice
        .command('inspect')
        .description(
          'the units left and what a take would decide for each limit of a route and tenant, its key and PTTL',
        ),
    ).addOption(
      new Option('--cost <n>', 'units of the take (default: the route’s cost)').argParser(
        integer(Number.MAX_SAFE_INTEGER),
      ),
    ),
  )
    .addHelpText('after', INSPECT_HELP)
    .action(run(async (o: InspectOptions) => (await import('./inspect.js')).inspect(o)));
}

function addReset(sluice: Command, run: Runner): void {
  redisOptions(
    scopeOptions(
      sluice
        .command('reset')
        .description('delete exactly one route and tenant’s state per limit, once confirmed'),
    )
      .option(
        '--include-shared',
        'with --user: also the limits the user shares with the tenant (per route, per tenant)',
      )
      .option('--policy <name>', 'only this limit (repeatable; default: every limit)', collect)
      .option('--yes', 'do not ask for a confirmation (needed without a terminal)'),
  )
    .addHelpText('after', RESET_HELP)
    .action(run(async (o: ResetOptions) => (await import('./reset.js')).reset(o)));
}

function addStats(sluice: Command, run: Runner): void {
  redisOptions(
    sluice
      .command('stats')
      .description('live keys per namespace and algorithm, memory, eviction policy, server')
      .option('--namespace <name>', 'only this namespace (default: every namespace)')
      .addOption(
        new Option('--max-seconds <s>', 'stop scanning after this long (counts then partial)')
          .default(10)
          .argParser(seconds),
      )
      .addOption(
        new Option('--count <n>', 'the COUNT hint of each SCAN')
          .default(1000)
          .argParser(integer(100_000)),
      ),
    false,
  )
    .addHelpText('after', STATS_HELP)
    .action(run(async (o: StatsOptions) => (await import('./stats.js')).stats(o)));
}

function addCheckConfig(sluice: Command, run: Runner): void {
  sluice
    .command('check-config')
    .description('validate a policy file: a summary, or every problem with its path')
    .argument('<file>', 'the policy file (JSON)')
    .option('--json', 'print one JSON object (for scripts)')
    .addHelpText('after', CHECK_HELP)
    .action(
      run(async (file: string, options: { json?: boolean }) =>
        // A file that cannot be read or parsed is answered before the library loads.
        (await import('./check-config.js')).checkConfig(file, await readJsonText(file), options),
      ),
    );
}

function port(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65_535) throw new InvalidArgumentError('a port from 0 to 65535');
  return n;
}

function addServe(sluice: Command, run: Runner): void {
  sluice
    .command('serve')
    .description('Envoy’s global rate limit service (gRPC), a drop-in for envoyproxy/ratelimit')
    .option(
      '--config <path>',
      'the rule files: a directory or one file (YAML of envoyproxy/ratelimit)',
    )
    .addOption(
      new Option('--grpc-port <n>', 'gRPC port (default: GRPC_PORT, else 8081)').argParser(port),
    )
    .addOption(
      new Option('--http-port <n>', 'HTTP port (default: PORT, else 8080)').argParser(port),
    )
    .option('--host <address>', 'address to listen on (default: GRPC_HOST, else 0.0.0.0)')
    .option('--redis-url <url>', 'Redis (default: REDIS_URL, else 127.0.0.1:6379)')
    .option('--redis-type <type>', 'SINGLE, CLUSTER or SENTINEL (default: REDIS_TYPE, else SINGLE)')
    .addOption(
      new Option(
        '--compat <counting>',
        'reference: count as envoyproxy/ratelimit (default: SLUICE_COMPAT, else sluice)',
      ).choices(['sluice', 'reference']),
    )
    .addOption(
      new Option('--timeout-ms <ms>', 'deadline of one decision (default 100)').argParser(
        integer(60_000),
      ),
    )
    .addOption(
      new Option('--max-in-flight <n>', 'calls decided at once (default 1000)').argParser(
        integer(1_000_000),
      ),
    )
    .option('--namespace <name>', 'the limiter’s namespace (default "serve")')
    .addHelpText('after', SERVE_HELP)
    .action(run(async (o: ServeOptions) => (await import('./serve.js')).serve(o)));
}

async function main(argv: string[]): Promise<number> {
  const result = { code: EXIT.ok as number, json: false };
  const sluice = program(argv, result);
  // `help nope` is a usage error, like `nope`.
  if (argv[0] === 'help' && argv[1] !== undefined && !argv[1].startsWith('-')) {
    if (!sluice.commands.some((c) => c.name() === argv[1])) {
      printError(`error: unknown command '${argv[1]}'`);
      printError('');
      console.error(sluice.helpInformation()); // our own text
      return EXIT.usage;
    }
  }
  try {
    await sluice.parseAsync(argv, { from: 'user' });
    return result.code;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version exit 0; every parsing error is a usage error.
      if (error.exitCode === 0) return EXIT.ok;
      if (argv.includes('--json')) {
        printJson({ ok: false, error: error.message.replace(/^error: /, '') });
      }
      return EXIT.usage;
    }
    if (error instanceof CliError) {
      const name = argv.find((a) => !a.startsWith('-')) ?? '';
      printError(`sluice ${name}: ${error.message}`);
      for (const line of error.details) printError(line);
      if (result.json) printJson({ ok: false, error: error.message, ...error.json }, null, 2);
      return error.exitCode;
    }
    throw error;
  }
}

async function demo(json: boolean): Promise<number> {
  const { NoRedisError, runDemo } = await import('../demo/run.js');
  try {
    const report = await runDemo(json ? undefined : print);
    if (json) printJson(report, null, 2);
    return report.pass ? 0 : 1;
  } catch (error) {
    if (error instanceof NoRedisError) {
      for (const line of error.lines) printError(line);
      // Scripts reading --json get an object whatever happened.
      if (json) printJson({ pass: false, error: error.message }, null, 2);
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
    printError(
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

// A reader that stops early (`sluice --help | head -1`) closes the pipe: not an error of ours.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(process.exitCode ?? 0);
  });
}

process.exitCode = await main(process.argv.slice(2));
