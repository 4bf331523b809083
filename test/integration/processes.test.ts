/**
 * No over-admission across OS processes: 3 processes × 100 concurrent takes released
 * together, limit 50 → exactly 50 admitted, and remaining values 49…0 each exactly once.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { nodeScript } from '../helpers/node-script.js';
import { randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const taker = new URL('../fixtures/taker.ts', import.meta.url);

describe('across processes', () => {
  it('3 OS processes × 100 concurrent takes, limit 50 → exactly 50 in total', async () => {
    const tenant = randomTenant();
    const children = Array.from({ length: 3 }, () =>
      spawn(process.execPath, nodeScript(taker), {
        env: {
          ...process.env,
          REDIS_URL: redis.server.url,
          TENANT: tenant,
          TAKES: '100',
          LIMIT: '50',
        },
        stdio: ['pipe', 'pipe', 'inherit'],
      }),
    );
    const lines = children.map((child) =>
      createInterface({ input: child.stdout })[Symbol.asyncIterator](),
    );
    for (const line of lines) assert.equal((await line.next()).value, 'ready');
    for (const child of children) child.stdin.write('go\n'); // released together
    const reports = await Promise.all(
      lines.map(
        async (line) =>
          JSON.parse((await line.next()).value as string) as {
            admitted: number;
            remaining: number[];
          },
      ),
    );
    await Promise.all(
      children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)),
    );
    assert.equal(
      reports.reduce((sum, r) => sum + r.admitted, 0),
      50,
    );
    const remaining = reports.flatMap((r) => r.remaining).sort((a, b) => a - b);
    assert.deepEqual(
      remaining,
      Array.from({ length: 50 }, (_, i) => i),
    );
  });
});
