/**
 * `sluice stats` and `sluice inspect` know the keys of priced work: a scope's block
 * (`<key>:b`), the records of retry-safe operations (`…:id:…`) and of reservations
 * (`…:rsv:…`), and a concurrency policy's lease sets, none counted as unknown; `inspect`
 * shows a blocked scope's remaining block time. A private real Redis; the built CLI.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { concurrency, fixedWindow, RateLimiter, tokenBucket } from 'sluice';
import { TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const cli = new URL('../../dist/cli/main.js', import.meta.url).pathname;
const redis = useRedis();
const dir = mkdtempSync(join(tmpdir(), 'sluice-cli-priced-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const namespace = 'st-priced';
const login = {
  algorithm: 'fixed-window',
  limit: 1,
  windowMs: 60_000,
  blockMs: 30_000,
  escalate: { factor: 2, maxMs: 120_000, withinMs: 60_000 },
};

function sluice(
  args: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [cli, ...args, '--url', redis.server.url],
      { env: { ...process.env, REDIS_URL: '' }, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('sluice stats and inspect: keys of priced work', () => {
  it('counts blocks, id and reservation records and lease sets; inspect shows the block', async () => {
    const file = join(dir, 'policies.json');
    writeFileSync(file, JSON.stringify({ routes: { 'POST/login': login } }));
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      namespace,
    });
    const { algorithm: _, ...options } = login;
    const blocking = fixedWindow(options);
    const scope = { tenant: 'acme', route: 'POST/login' };
    await limiter.take(scope, blocking);
    const refused = await limiter.take(scope, blocking);
    assert.equal(refused.blocked, true, 'the refusal starts a block');
    const bucket = tokenBucket({ capacity: 5, refillIntervalMs: 60_000 });
    await limiter.take({ tenant: 'acme', route: 'GET/x' }, bucket, { id: 'take-1' });
    await limiter.reserve({ tenant: 'acme', route: 'GET/y' }, bucket, { id: 'rsv-1' });
    const lease = await limiter.acquire(
      { tenant: 'beta', route: 'GET/z' },
      concurrency({ limit: 2, leaseMs: 60_000 }),
    );
    assert.equal(lease.allowed, true);

    const stats = await sluice(['stats', '--namespace', namespace, '--json']);
    assert.equal(stats.code, 0, stats.stderr);
    const report = JSON.parse(stats.stdout);
    const counts = report.namespaces[namespace];
    assert.equal(counts.keys, 4, 'the window, two buckets, the lease set');
    assert.equal(counts.algorithms.concurrency, 1);
    assert.equal(counts.blocks, 1);
    assert.equal(counts.idRecords, 1);
    assert.equal(counts.reservations, 1);
    assert.equal(report.otherKeysByKind.unknownKind, 0, 'nothing unknown');
    assert.equal(
      counts.keys + counts.blocks + counts.idRecords + counts.reservations + report.otherKeys,
      report.scan.scanned,
    );

    const args = ['--config', file, '--route', 'POST/login', '--tenant', 'acme'];
    const [text, json] = await Promise.all([
      sluice(['inspect', ...args, '--namespace', namespace]),
      sluice(['inspect', ...args, '--namespace', namespace, '--json']),
    ]);
    assert.equal(json.code, 0, json.stderr);
    const block = JSON.parse(json.stdout).limits[0].block;
    assert.equal(block.blockMs, 30_000);
    assert.equal(block.level, 1);
    // Less what passed since the refusal (a loaded machine runs the CLI slowly).
    assert.ok(block.blockedForMs > 0 && block.blockedForMs <= 30_000, `${block.blockedForMs}`);
    assert.match(
      text.stdout,
      /\n {2}block {7}blocked for [0-9.]+ s \(block 1 within the escalation period\)\n/,
    );
  });
});
