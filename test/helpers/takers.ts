/**
 * Test fixture: taker processes released together. Each process of `fixture` reads one line
 * per race on stdin, prepares its calls, prints `ready`, waits for `go` on the Redis pub/sub
 * channel `go:<tenant>` (so every process fires at the same moment) and prints its result as
 * one JSON line. The processes start on first use and are killed after the file.
 */
import assert from 'node:assert/strict';
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { after } from 'node:test';
import { nodeScript } from './node-script.js';
import type { RedisFixture } from './redis.js';

export interface Takers {
  /** One race: `line` to every process, then `go` for `tenant`; each process's JSON result. */
  race<T>(line: string, tenant: string): Promise<T[]>;
}

export function useTakers(fixture: URL, count: number, redis: RedisFixture): Takers {
  let children: ChildProcessByStdio<Writable, Readable, null>[] = [];
  let lines: AsyncIterator<string>[] = [];
  after(() => {
    for (const child of children) child.kill();
  });
  const start = () => {
    if (children.length > 0) return;
    children = Array.from({ length: count }, () =>
      spawn(process.execPath, nodeScript(fixture), {
        env: { ...process.env, REDIS_URL: redis.server.url },
        stdio: ['pipe', 'pipe', 'inherit'],
      }),
    );
    lines = children.map((child) =>
      createInterface({ input: child.stdout })[Symbol.asyncIterator](),
    );
  };
  return {
    async race<T>(line: string, tenant: string): Promise<T[]> {
      start();
      for (const child of children) child.stdin.write(`${line}\n`);
      for (const next of lines) assert.equal((await next.next()).value, 'ready');
      await (await redis.admin()).client.publish(`go:${tenant}`, 'go');
      return Promise.all(
        lines.map(async (next) => JSON.parse((await next.next()).value as string) as T),
      );
    },
  };
}
