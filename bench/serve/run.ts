/**
 * `sluice serve` under load: a private redis-server, one `sluice serve` process (the built
 * CLI), warmed up, and a gRPC load generator in a process of its own (`load-h2.ts`, raw HTTP/2;
 * `--client grpc-js`: `load.ts`), at 1, 16 and 256 concurrent calls with 1 and 3 descriptors
 * per request, or at fixed rates (`--cases`). For each case: decisions per second, p50/p99,
 * and per decision the server process's CPU (from /proc), the load generator's, Redis's
 * (`INFO`) and Redis's script calls, with the machine's load average; then the library's own
 * `take` in process (CPU per decision of a RateLimiter on the same Redis).
 *
 *   npm run build && node --import tsx bench/serve/run.ts [--duration 3000]
 *     [--cases 1x256,3r2000] [--client h2|grpc-js] [--cli other/dist/cli/main.js]
 *     [--server-node-args "--cpu-prof --cpu-prof-dir=DIR"] [--server sluice|floor|floor-raw]
 *
 * `--server floor`: instead of `sluice serve`, the bare grpc-js server of `floor.ts` (the same
 * `.proto`, a constant `OK`, no Redis): what the service cannot go under on this machine;
 * `floor-raw`: that server with no protobuf decoding or encoding.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { startRedisServer } from '../../src/demo/redis-server.js';
import { fixedWindow, RateLimiter } from '../../src/index.js';
import { connectRedis } from '../../src/redis/node-redis/connect.js';
import { parseInfo } from '../redis-stats.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const durationAt = process.argv.indexOf('--duration');
const DURATION_MS = durationAt > 0 ? Number(process.argv[durationAt + 1]) : 3000;
const casesAt = process.argv.indexOf('--cases');
/**
 * `--cases 1x256,3x16,3r4000`: descriptors `x` concurrent calls (a closed loop), or
 * descriptors `r` calls per second (an open loop, `load-h2.ts` only); default every closed
 * combination of 1 and 3 descriptors at 1, 16 and 256 concurrent calls.
 */
const CASES = (
  casesAt > 0
    ? (process.argv[casesAt + 1] as string).split(',')
    : [1, 3].flatMap((d) => [1, 16, 256].map((c) => `${d}x${c}`))
).map((c) => {
  const [d, n] = c.split(/[xr]/).map(Number) as [number, number];
  return c.includes('r')
    ? { descriptors: d, concurrency: 2000, rate: n }
    : { descriptors: d, concurrency: n, rate: 0 };
});
/** `--server-node-args "--cpu-prof --cpu-prof-dir=/tmp/p"`: node flags of the server process. */
const nodeArgsAt = process.argv.indexOf('--server-node-args');
const NODE_ARGS = nodeArgsAt > 0 ? (process.argv[nodeArgsAt + 1] as string).split(' ') : [];
const clientAt = process.argv.indexOf('--client');
/** `--client h2` (default, `load-h2.ts`) or `grpc-js` (`load.ts`). */
const LOAD = clientAt > 0 && process.argv[clientAt + 1] === 'grpc-js' ? 'load.ts' : 'load-h2.ts';
const cliAt = process.argv.indexOf('--cli');
/** `--cli PATH`: another build's `dist/cli/main.js` (a before/after comparison). */
const CLI = cliAt > 0 ? (process.argv[cliAt + 1] as string) : join(ROOT, 'dist/cli/main.js');
const serverAt = process.argv.indexOf('--server');
/** `--server sluice` (default), `floor` or `floor-raw` (`floor.ts`). */
const SERVER = serverAt > 0 ? (process.argv[serverAt + 1] as string) : 'sluice';
const TICKS = Number(spawnSync('getconf', ['CLK_TCK']).stdout.toString().trim() || 100);

const RULES = `
domain: bench
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1000000000 }
  - key: route
    value: POST/orders
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 1000000000 }
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 1000000000 }
`;

/** The 1-minute load average (other jobs share the machine). */
const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ')[0];

/** Redis's CPU (µs) and top-level script calls so far (`INFO cpu commandstats`). */
function redisStats(url: string) {
  const text = spawnSync('redis-cli', ['-u', url, 'INFO', 'everything'], {
    encoding: 'utf8',
  }).stdout;
  return parseInfo(text);
}

/** User + system CPU of a process so far, in µs (Linux /proc). */
function cpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / TICKS;
}

const redis = await startRedisServer();
const dir = mkdtempSync(join(tmpdir(), 'sluice-serve-bench-'));
writeFileSync(join(dir, 'bench.yaml'), RULES);
const server = spawn(
  process.execPath,
  SERVER === 'sluice'
    ? [...NODE_ARGS, CLI, 'serve', '--config', dir, '--redis-url', redis.url].concat([
        '--host',
        '127.0.0.1',
        '--grpc-port',
        '0',
        '--http-port',
        '0',
        '--max-in-flight',
        '5000',
      ])
    : [...NODE_ARGS, '--import', 'tsx', join(ROOT, 'bench/serve/floor.ts')].concat(
        SERVER === 'floor-raw' ? ['--codec', 'raw'] : [],
      ),
  { stdio: ['ignore', 'ignore', 'pipe'], cwd: ROOT },
);
const port = await new Promise<number>((resolve, reject) => {
  let text = '';
  server.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
    const m = /gRPC on port (\d+)/.exec(text);
    if (m) resolve(Number(m[1]));
  });
  server.once('exit', () => reject(new Error(text)));
});

const rows: string[] = [];
const load = (concurrency: number, descriptors: number, durationMs: number, rate = 0) =>
  spawnSync(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'bench/serve', LOAD)].concat(
      [port, concurrency, descriptors, durationMs, rate].map(String),
    ),
    { encoding: 'utf8', cwd: ROOT },
  );
try {
  // Warm the server up (its JIT, its connections), unmeasured: the first case would pay for it.
  load(64, 3, 2000);
  for (const { descriptors, concurrency, rate } of CASES) {
    {
      const before = cpuUs(server.pid as number);
      const redisBefore = redisStats(redis.url);
      const out = load(concurrency, descriptors, DURATION_MS, rate);
      const cpu = cpuUs(server.pid as number) - before;
      const redisAfter = redisStats(redis.url);
      const r = JSON.parse(out.stdout.trim().split('\n').pop() as string);
      const calls = Math.max(1, r.calls);
      const scripts = (redisAfter.scriptCalls - redisBefore.scriptCalls) / calls;
      const redisCpu = (redisAfter.cpuUs - redisBefore.cpuUs) / calls;
      rows.push(
        `| ${descriptors} | ${rate > 0 ? `open loop, ${rate.toLocaleString('en-US')}/s` : concurrency} | ${r.perSecond.toLocaleString('en-US')} | ${(r.p50Us / 1000).toFixed(2)} | ${(r.p99Us / 1000).toFixed(2)} | ${Math.round(cpu / calls)} | ${Math.round(r.clientCpuUs / calls)} | ${Math.round(redisCpu)} | ${scripts.toFixed(2)} | ${r.errors} | ${loadAverage()} |`,
      );
      console.log(rows.at(-1));
      if (r.errors > 0) console.log(JSON.stringify(r.errorKinds));
    }
  }
  // The library's own take, in process, 16 callers: CPU per decision (`--no-library`: not).
  if (!process.argv.includes('--no-library')) await libraryTake();
} finally {
  server.kill('SIGTERM');
  await new Promise((resolve) => server.once('exit', resolve));
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}

/** The library's own `take` on the same Redis, in process, 16 callers: CPU per decision. */
async function libraryTake(): Promise<void> {
  const client = await connectRedis({ url: redis.url });
  const limiter = new RateLimiter({ client, maxInFlight: 5000 });
  const policy = fixedWindow({ limit: 1_000_000_000, windowMs: 3_600_000 });
  await limiter.ready();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let takes = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (performance.now() - t0 < DURATION_MS) {
        await limiter.take({ tenant: `u${Math.floor(Math.random() * 10_000)}` }, policy);
        takes++;
      }
    }),
  );
  const used = process.cpuUsage(cpu0);
  const seconds = (performance.now() - t0) / 1000;
  const line = `library take (in process, 16 callers): ${Math.round(takes / seconds).toLocaleString('en-US')}/s, ${Math.round((used.user + used.system) / takes)} µs CPU per decision`;
  rows.push(line);
  console.log(line);
  await client.close();
}
