/**
 * The parent's side of one measured run: forks runner.ts in a fresh process, reads Redis's
 * counters (INFO) right before `go` and right after `result`, and derives per-decision
 * figures. A child that hangs is killed by its pid.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { diffSnapshots, parseInfo, type RedisSnapshot } from './redis-stats.js';
import type { ChildMeasurement, ChildMessage, ParentMessage, RunConfig } from './types.js';

const RUNNER = new URL('./runner.ts', import.meta.url);
/** Allowance for process start, module loading and connecting (tsx compiles on first use). */
const SLACK_MS = 30_000;

/** Sends a command on the parent's admin connection (any node-redis-like client). */
export interface AdminClient {
  sendCommand(args: string[]): Promise<unknown>;
}

export async function readSnapshot(admin: AdminClient): Promise<RedisSnapshot> {
  return parseInfo(String(await admin.sendCommand(['INFO', 'cpu', 'commandstats'])));
}

export interface Measured {
  readonly child: ChildMeasurement;
  readonly redis: RedisSnapshot;
}

/** Runs `config` in a new child process; rejects when the child fails or times out. */
export async function measureInChild(config: RunConfig, admin: AdminClient): Promise<Measured> {
  // Every run starts from an empty keyspace: the keys an earlier run left (hundreds of
  // thousands with TTLs, on random keys) would make Redis spend the next run expiring them.
  // This is the harness's own private redis-server, started for this run of the bench.
  await admin.sendCommand(['FLUSHALL']);
  const child = fork(RUNNER, [JSON.stringify(config)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  try {
    await expectMessage(child, 'ready', config.warmupMs + SLACK_MS);
    const before = await readSnapshot(admin);
    const resultPromise = expectMessage(child, 'result', config.durationMs + SLACK_MS);
    send(child, { type: 'go' });
    const result = await resultPromise;
    const after = await readSnapshot(admin);
    if (result.type !== 'result') throw new Error(`unexpected message ${result.type}`);
    send(child, { type: 'finish' });
    await exited(child, 10_000);
    return { child: result.measurement, redis: diffSnapshots(before, after) };
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited(child, 5_000);
    }
  }
}

function send(child: ChildProcess, message: ParentMessage): void {
  child.send(message);
}

/** The next message of `type`; rejects on a `failed` message, an exit, or the timeout. */
function expectMessage(
  child: ChildProcess,
  type: ChildMessage['type'],
  timeoutMs: number,
): Promise<ChildMessage> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    const onMessage = (message: ChildMessage) => {
      if (message.type === 'failed') {
        cleanup();
        reject(new Error(`runner failed: ${message.message}`));
      } else if (message.type === type) {
        cleanup();
        resolve(message);
      }
    };
    const onExit = (code: number | null, signal: string | null) => {
      cleanup();
      reject(new Error(`runner exited (code ${code}, signal ${signal}) before "${type}"`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`runner sent no "${type}" within ${timeoutMs} ms`));
    }, timeoutMs);
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}

/** Waits for the child's exit; kills it (by pid, via the handle) after `timeoutMs`. */
function exited(child: ChildProcess, timeoutMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
