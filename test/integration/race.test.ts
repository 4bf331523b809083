/**
 * Case C03 — read-then-write races across replicas: 4 processes × 50 callers released
 * together on a pub/sub "go", 200 takes on one scope, capacity 20 per 60 s, 20 runs per
 * policy on fresh scopes: every run admits exactly 20, with remaining 19…0 each once.
 */
import assert from 'node:assert/strict';
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const taker = new URL('../fixtures/race-taker.ts', import.meta.url).pathname;
const RUNS = 20;
const POLICIES = [
  'fixed-window',
  'sliding-window-log',
  'sliding-window-counter',
  'token-bucket',
  'gcra',
];

let children: ChildProcessByStdio<Writable, Readable, null>[] = [];
let lines: AsyncIterator<string>[] = [];

/** Starts the four processes on first use (the Redis fixture is up by then). */
function start(): void {
  if (children.length > 0) return;
  children = Array.from({ length: 4 }, () =>
    spawn(process.execPath, ['--import', 'tsx', taker], {
      env: { ...process.env, REDIS_URL: redis.server.url },
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  lines = children.map((child) => createInterface({ input: child.stdout })[Symbol.asyncIterator]());
}

after(() => {
  for (const child of children) child.kill();
});

async function race(policy: string): Promise<number[]> {
  start();
  const tenant = randomTenant();
  for (const child of children) child.stdin.write(`${tenant} ${policy}\n`);
  for (const line of lines) assert.equal((await line.next()).value, 'ready');
  await (await redis.admin()).publish(`go:${tenant}`, 'go');
  const reports = await Promise.all(
    lines.map(async (line) => JSON.parse((await line.next()).value as string) as number[]),
  );
  return reports.flat().sort((a, b) => a - b);
}

describe('case C03: 4 processes × 50 callers released together', () => {
  for (const policy of POLICIES) {
    it(`${policy}: ${RUNS} runs each admit exactly 20, remaining 19…0 once each`, async () => {
      for (let run = 0; run < RUNS; run++) {
        assert.deepEqual(
          await race(policy),
          Array.from({ length: 20 }, (_, i) => i),
          `run ${run + 1}`,
        );
      }
    });
  }
});
