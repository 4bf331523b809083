/**
 * `sluice inspect` and `sluice reset` on a route with a concurrency limit, as a child
 * process against a private redis-server: inspect lists the live leases of the scope (read,
 * never written), reset deletes them so the next acquisition starts afresh.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { concurrency, RateLimiter } from 'sluice';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const cli = new URL('../../dist/cli/main.js', import.meta.url).pathname;
const redis = useRedis();
const FILE = {
  policies: { running: { algorithm: 'concurrency', limit: 3, leaseMs: 60_000 } },
  routes: { 'POST/exports': ['running'] },
};
let dir = '';
let file = '';
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'sluice-cli-leases-'));
  file = join(dir, 'policies.json');
  writeFileSync(file, JSON.stringify(FILE));
});
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function sluice(args: readonly string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [cli, ...args, '--config', file, '--url', redis.server.url],
      { env: { ...process.env, REDIS_URL: '' }, timeout: 30_000 },
      (error, stdout) => resolve({ code: error === null ? 0 : Number(error.code), stdout }),
    );
    child.stdin?.end();
  });
}

describe('sluice inspect and reset: leases', () => {
  it('inspect lists the live leases; reset clears them', async () => {
    const policy = concurrency({ limit: 3, leaseMs: 60_000, name: 'running' });
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const tenant = randomTenant();
    const scope = { tenant, route: 'POST/exports' };
    await limiter.acquire(scope, policy, { id: 'export-1' });
    await limiter.acquire(scope, policy, { id: 'export-2' });
    const args = ['--route', 'POST/exports', '--tenant', tenant];
    const inspected = await sluice(['inspect', '--json', ...args]);
    assert.equal(inspected.code, 0, inspected.stdout);
    const limit = JSON.parse(inspected.stdout).limits[0];
    assert.equal(limit.algorithm, 'concurrency');
    assert.equal(limit.leaseMs, 60_000);
    assert.equal(limit.windowMs, undefined);
    assert.deepEqual(
      limit.leases.map((l: { id: string }) => l.id),
      ['export-1', 'export-2'],
    );
    assert.ok(limit.leases.every((l: { expiresInMs: number }) => l.expiresInMs <= 60_000));
    assert.equal(limit.decision.remaining, 1);
    const text = await sluice(['inspect', ...args]);
    assert.match(text.stdout, /leases {6}2 held: export-1 \(expires in [\d.]+ s\), export-2/);
    assert.match(text.stdout, /concurrency, 3 at once, leases of 60 s/);
    const reset = await sluice(['reset', '--yes', ...args]);
    assert.equal(reset.code, 0, reset.stdout);
    assert.equal((await limiter.peek(scope, policy)).remaining, 3);
    assert.equal(await limiter.release(scope, policy, 'export-1'), false);
  });
});
