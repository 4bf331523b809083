/**
 * One measured run, in a fresh child process forked by run.ts.
 *
 * argv[2] is a JSON RunConfig. Protocol over IPC: set up and warm up, send `ready`; on `go`
 * (sent once the parent has read Redis's counters) run the closed loop for the duration and
 * send `result`; on `finish` (the parent has read the counters again) close and exit.
 *
 * The closed loop: C workers, each awaiting its take before issuing the next, until the
 * deadline; the calls in flight at the deadline are awaited and counted.
 */
import { performance } from 'node:perf_hooks';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { loadContender } from './contenders/index.js';
import { LatencyRecorder } from './latency.js';
import { getScenario } from './scenarios.js';
import type { ChildMeasurement, ChildMessage, ParentMessage, RunConfig, Taker } from './types.js';

interface LoopCounts {
  allowed: number;
  denied: number;
  errors: number;
  firstError: string | undefined;
  elapsedMs: number;
}

async function closedLoop(
  taker: Taker,
  nextKey: () => string,
  concurrency: number,
  durationMs: number,
  recorder: LatencyRecorder | undefined,
): Promise<LoopCounts> {
  const counts: LoopCounts = {
    allowed: 0,
    denied: 0,
    errors: 0,
    firstError: undefined,
    elapsedMs: 0,
  };
  const start = performance.now();
  const end = start + durationMs;
  const worker = async () => {
    let now = performance.now();
    while (now < end) {
      const key = nextKey();
      const t0 = now;
      try {
        if (await taker.take(key)) counts.allowed++;
        else counts.denied++;
        now = performance.now();
        recorder?.record(now - t0);
      } catch (error) {
        counts.errors++;
        counts.firstError ??= error instanceof Error ? error.message : String(error);
        await yieldToLoop(); // a failing call may reject synchronously: never spin
        now = performance.now();
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  counts.elapsedMs = performance.now() - start;
  return counts;
}

function send(message: ChildMessage): void {
  if (process.connected) process.send?.(message);
}

function nextMessage(type: ParentMessage['type']): Promise<void> {
  return new Promise((resolve) => {
    const onMessage = (message: ParentMessage) => {
      if (message.type !== type) return;
      process.off('message', onMessage);
      resolve();
    };
    process.on('message', onMessage);
  });
}

let finished = false;

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as RunConfig;
  const scenario = getScenario(config.scenario);
  const contender = await loadContender(config.contender);
  const taker = await contender.setup(config.redisUrl, scenario.policy);

  await closedLoop(taker, scenario.nextKey, config.concurrency, config.warmupMs, undefined);
  const go = nextMessage('go');
  send({ type: 'ready' });
  await go;

  const recorder = new LatencyRecorder();
  const cpuBefore = process.cpuUsage();
  const counts = await closedLoop(
    taker,
    scenario.nextKey,
    config.concurrency,
    config.durationMs,
    recorder,
  );
  const cpu = process.cpuUsage(cpuBefore);
  const [p50Us = 0, p99Us = 0, p999Us = 0, maxUs = 0] = recorder.percentilesUs([
    0.5, 0.99, 0.999, 1,
  ]);
  const measurement: ChildMeasurement = {
    decisions: counts.allowed + counts.denied,
    allowed: counts.allowed,
    denied: counts.denied,
    errors: counts.errors,
    ...(counts.firstError === undefined ? {} : { firstError: counts.firstError }),
    elapsedMs: counts.elapsedMs,
    p50Us,
    p99Us,
    p999Us,
    maxUs,
    nodeCpuUs: cpu.user + cpu.system,
  };
  const finish = nextMessage('finish');
  send({ type: 'result', measurement });
  await finish;
  finished = true;
  await taker.close();
  process.disconnect();
}

// The parent went away (Ctrl-C, crash): stop at once rather than load Redis for nobody.
process.once('disconnect', () => {
  if (!finished) process.exit(1);
});

main().catch((error: unknown) => {
  send({
    type: 'failed',
    message: error instanceof Error ? (error.stack ?? error.message) : String(error),
  });
  process.exitCode = 1;
  finished = true;
  if (process.connected) process.disconnect();
});
