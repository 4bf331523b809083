/**
 * The main job, run as a user runs it: `sluice demo --json` from the built package, with a
 * private redis-server of its own (REDIS_URL unset).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

const cli = new URL('../../dist/cli/main.js', import.meta.url).pathname;

describe('sluice demo', () => {
  it('--json: exactly 10 of 30 admitted across 3 replicas, restored after the window, 503 + Retry-After: 1 when Redis is cut off', async () => {
    assert.ok(existsSync(cli), 'dist/ is missing: run `npm run build` (npm test does)');
    const env = { ...process.env };
    delete env.REDIS_URL;
    const { stdout } = await promisify(execFile)(process.execPath, [cli, 'demo', '--json'], {
      env,
      timeout: 60_000,
    });
    const report = JSON.parse(stdout);
    assert.equal(report.admitted, 10);
    assert.equal(report.limited, 20);
    assert.equal(report.perReplica.length, 3);
    assert.equal(
      report.perReplica.reduce((sum: number, r: { admitted: number }) => sum + r.admitted, 0),
      10,
    );
    // ceil((PTTL + 1) / 1000) for a 1000 ms window: 1, or 2 when the denial came in the
    // same millisecond the window began (PTTL 1000: the key is gone only after 1001 ms).
    assert.ok(['1', '2'].includes(report.retryAfterSeen), `Retry-After ${report.retryAfterSeen}`);
    assert.equal(report.restoredAfterWindow, true);
    assert.equal(report.failClosedStatus, 503);
    assert.equal(report.failClosedRetryAfter, '1');
    assert.equal(report.pass, true);
  });

  it('an unknown command or option is a usage error (exit 2)', async () => {
    const run = promisify(execFile);
    await assert.rejects(run(process.execPath, [cli, 'nope']), { code: 2 });
    await assert.rejects(run(process.execPath, [cli, 'demo', '--bogus']), { code: 2 });
  });

  it('a REDIS_URL that does not answer, or is not a URL, is a setup error: exit 2, a JSON answer, no stack traces', async () => {
    const run = promisify(execFile);
    for (const url of ['redis://127.0.0.1:1', 'not a url']) {
      const failed = await run(process.execPath, [cli, 'demo', '--json'], {
        env: { ...process.env, REDIS_URL: url },
        timeout: 30_000,
      }).then(
        () => assert.fail(`exit 0 with REDIS_URL=${url}`),
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
      assert.equal(failed.code, 2, url);
      const answer = JSON.parse(failed.stdout);
      assert.equal(answer.pass, false);
      assert.match(answer.error, /REDIS_URL/);
      assert.doesNotMatch(failed.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  it('a REDIS_URL with control characters is printed escaped, and exact in the JSON answer', async () => {
    const run = promisify(execFile);
    const url = 'not a url\x1b[2J\u009b';
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point.
    const raw = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
    for (const args of [['demo'], ['demo', '--json']]) {
      const failed = await run(process.execPath, [cli, ...args], {
        env: { ...process.env, REDIS_URL: url },
        timeout: 30_000,
      }).then(
        () => assert.fail(`exit 0 with REDIS_URL=${JSON.stringify(url)}`),
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
      assert.equal(failed.code, 2);
      assert.doesNotMatch(failed.stderr, raw, 'stderr');
      assert.doesNotMatch(failed.stdout, raw, 'stdout');
      assert.ok(failed.stderr.includes('REDIS_URL is not a URL: "not a url\\u001b[2J\\u009b"'));
      if (args.includes('--json')) {
        assert.equal(
          JSON.parse(failed.stdout).error,
          `REDIS_URL is not a URL: ${JSON.stringify(url)}`,
        );
      }
    }
  });
});
