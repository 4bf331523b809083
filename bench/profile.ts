/**
 * Profiles one contender on both sides: `node --import tsx bench/profile.ts <contender>
 * [scenario] [concurrency] [seconds]`.
 *
 * Starts a private redis-server, runs the contender's closed loop in this process (so that
 * `node --cpu-prof` sees it) for the given seconds, and prints what Redis spent per
 * decision (`INFO cpu commandstats`: CPU, per command, calls and µs), and the process's CPU.
 * Set `PERF_RECORD=1` to also record the redis-server process with `perf record -g` for the
 * measured span (written to `$PERF_OUT`, default `bench-profile.perf.data`; read with `perf report`). The server
 * is stopped by its pid at the end. Set `CPU_PROFILE=<file.cpuprofile>` to write a CPU
 * profile of this process over the measured span only (read it with
 * bench/cpu-profile-summary.ts).
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { performance } from 'node:perf_hooks';
import { createClient } from 'redis';
import { startRedisServer } from '../src/demo/redis-server.js';
import { assertBuildFresh } from './contenders/build.js';
import { loadContender } from './contenders/index.js';
import { getScenario } from './scenarios.js';

const [name = 'sluice', scenarioName = 'random', c = '256', seconds = '3'] = process.argv.slice(2);
const scenario = getScenario(scenarioName);
const concurrency = Number(c);
await assertBuildFresh();
const redis = await startRedisServer();
const admin = createClient({ url: redis.url });
await admin.connect();
const info = async () => String(await admin.sendCommand(['INFO', 'commandstats']));
const cpu = async () => {
  const text = String(await admin.sendCommand(['INFO', 'cpu']));
  let total = 0;
  for (const m of text.matchAll(/used_cpu_(?:sys|user):([\d.]+)/g)) total += Number(m[1]);
  return total * 1e6;
};
try {
  const taker = await (await loadContender(name)).setup(redis.url, scenario.policy);
  let decisions = 0;
  let errors = 0;
  const loop = async (ms: number) => {
    const end = performance.now() + ms;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          try {
            await taker.take(scenario.nextKey());
            decisions++;
          } catch {
            errors++; // a deadline missed on a loaded machine: counted, not fatal
          }
        }
      }),
    );
  };
  await loop(500);
  await admin.sendCommand(['CONFIG', 'RESETSTAT']);
  decisions = 0;
  errors = 0;
  const cpuBefore = await cpu();
  const perf =
    process.env.PERF_RECORD === '1'
      ? spawn(
          'perf',
          [
            'record',
            '-g',
            '-o',
            process.env.PERF_OUT ?? 'bench-profile.perf.data',
            '-p',
            String(redis.pid),
          ],
          {
            stdio: 'inherit',
          },
        )
      : undefined;
  const inspector = process.env.CPU_PROFILE === undefined ? undefined : new Session();
  if (inspector !== undefined) {
    inspector.connect();
    await inspector.post('Profiler.enable');
    await inspector.post('Profiler.start');
  }
  const nodeBefore = process.cpuUsage();
  const t0 = performance.now();
  await loop(Number(seconds) * 1000);
  const elapsed = performance.now() - t0;
  const node = process.cpuUsage(nodeBefore);
  if (inspector !== undefined) {
    const { profile } = await inspector.post('Profiler.stop');
    writeFileSync(process.env.CPU_PROFILE as string, JSON.stringify(profile));
    inspector.disconnect();
  }
  perf?.kill('SIGINT');
  const redisCpu = (await cpu()) - cpuBefore;
  const stats = await info();
  console.log(
    `${name} ${scenarioName} C=${concurrency}: ${Math.round((decisions / elapsed) * 1000)} decisions/s, Node CPU ${((node.user + node.system) / decisions).toFixed(2)} µs/dec, Redis CPU ${(redisCpu / decisions).toFixed(2)} µs/dec, ${errors} errors`,
  );
  for (const m of stats.matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)) {
    const [, cmd, calls, usec] = m;
    if (cmd === 'info' || cmd === 'config|resetstat') continue;
    console.log(
      `  ${cmd}: ${(Number(calls) / decisions).toFixed(3)} calls/dec, ${(Number(usec) / decisions).toFixed(2)} µs/dec, ${(Number(usec) / Number(calls)).toFixed(2)} µs/call`,
    );
  }
  await taker.close();
  if (perf !== undefined) await new Promise((resolve) => perf.once('exit', resolve));
} finally {
  await admin.close();
  await redis.stop();
}
