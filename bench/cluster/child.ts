/**
 * One measured run of the cluster benchmark, in a fresh child process forked by run.ts.
 *
 * argv[2] is a JSON {@link ChildConfig}. It first checks the variant decides exactly (30
 * concurrent takes for each of 24 tenants, limit 10 → exactly 10 each), then warms up,
 * sends `ready`; on `go` runs the closed loop (C workers, each awaiting its take before the
 * next, random tenants of the `random` scenario) for the duration and sends `result`; on
 * `finish` closes and exits.
 */
import { performance } from 'node:perf_hooks';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { LatencyRecorder } from '../latency.js';
import { getScenario } from '../scenarios.js';
import type { ChildMeasurement } from '../types.js';
import { type Targets, type VariantTaker, variants } from './variants.js';

export interface ChildConfig {
  readonly variant: string;
  readonly concurrency: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  readonly targets: Targets;
}

export type ChildMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'result'; readonly measurement: ChildMeasurement }
  | { readonly type: 'failed'; readonly message: string };

function send(message: ChildMessage): void {
  if (process.connected) process.send?.(message);
}

function nextMessage(type: 'go' | 'finish'): Promise<void> {
  return new Promise((resolve) => {
    const onMessage = (message: { type: string }) => {
      if (message.type !== type) return;
      process.off('message', onMessage);
      resolve();
    };
    process.on('message', onMessage);
  });
}

async function check(taker: VariantTaker): Promise<void> {
  const salt = `check-${process.pid}-${Date.now()}`;
  const tenants = Array.from({ length: 24 }, (_, i) => `${salt}-${i}`);
  const results = await Promise.all(
    tenants.map(async (tenant) => {
      const decisions = await Promise.all(Array.from({ length: 30 }, () => taker.take(tenant)));
      return decisions.filter(Boolean).length;
    }),
  );
  const wrong = results.filter((n) => n !== 10);
  if (wrong.length > 0) throw new Error(`check failed: admitted ${results.join(',')} (limit 10)`);
}

async function closedLoop(
  taker: VariantTaker,
  nextKey: () => string,
  concurrency: number,
  durationMs: number,
  recorder: LatencyRecorder | undefined,
) {
  const counts = { allowed: 0, denied: 0, errors: 0, firstError: undefined as string | undefined };
  const start = performance.now();
  const end = start + durationMs;
  const worker = async () => {
    let now = performance.now();
    while (now < end) {
      const t0 = now;
      try {
        if (await taker.take(nextKey())) counts.allowed++;
        else counts.denied++;
        now = performance.now();
        recorder?.record(now - t0);
      } catch (error) {
        counts.errors++;
        counts.firstError ??= error instanceof Error ? error.message : String(error);
        await yieldToLoop();
        now = performance.now();
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ...counts, elapsedMs: performance.now() - start };
}

let finished = false;

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as ChildConfig;
  const variant = variants[config.variant];
  if (variant === undefined) throw new Error(`unknown variant ${config.variant}`);
  // A generous deadline for the check: it asks exactness, not speed (cold script caches).
  const checker = await variant.setup(config.targets, { limit: 10, windowMs: 60_000 }, 5000);
  await check(checker);
  await checker.close();
  const scenario = getScenario('random');
  const taker = await variant.setup(config.targets, scenario.policy);
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
  const finish = nextMessage('finish');
  send({
    type: 'result',
    measurement: {
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
    },
  });
  await finish;
  finished = true;
  await taker.close();
  process.disconnect();
}

// The parent went away: stop at once rather than load Redis for nobody.
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
