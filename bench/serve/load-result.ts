/** The one JSON line a load generator of `bench/serve/run.ts` prints at its end. */
import { performance } from 'node:perf_hooks';
import type { LatencyRecorder } from '../latency.js';

/**
 * Prints calls, errors (and their kinds), calls not `OK`, decisions per second, p50/p99 in µs
 * and the generator's own CPU in µs since `cpu0`.
 *
 * @param started `performance.now()` when the measured span began
 */
export function printResult(
  latencies: LatencyRecorder,
  counts: { errors: number; over: number; errorKinds?: Map<string, number> },
  started: number,
  cpu0: NodeJS.CpuUsage,
): void {
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const [p50, p99] = latencies.percentilesUs([0.5, 0.99]);
  console.log(
    JSON.stringify({
      calls: latencies.count,
      errors: counts.errors,
      over: counts.over,
      perSecond: Math.round(latencies.count / seconds),
      p50Us: p50,
      p99Us: p99,
      clientCpuUs: cpu.user + cpu.system,
      errorKinds: Object.fromEntries(counts.errorKinds ?? []),
    }),
  );
}
