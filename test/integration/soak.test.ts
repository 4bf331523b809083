/**
 * The bounded soak: mixed load from 3 processes over many scopes and all five
 * policies against one Redis, which is killed (`kill -9`) and restarted twice in the middle.
 *
 * Redis runs with `appendonly yes`, `appendfsync always`, so a restart keeps every
 * acknowledged write — the counters and the decision log alike. Every admitted decision is
 * logged by Redis itself inside the deciding script (test/helpers/decision-log.ts), stamped
 * with the Redis time the algorithm decided on; test/helpers/admission-check.ts re-derives
 * each policy's bound from that log. It must hold for every scope and window; no process may
 * see an unhandled rejection or an uncaught exception; each must be admitted again after each
 * restart without being restarted itself; and every key must carry a TTL at the end.
 * `SLUICE_SOAK_SECONDS` sets the length: 20 s in `npm test` (over ten windows of every policy
 * around each restart), `npm run test:soak` runs it for 300 s.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { algorithmOf, checkAdmissions } from '../helpers/admission-check.js';
import { readDecisionLog } from '../helpers/decision-log.js';
import { nodeScript } from '../helpers/node-script.js';

const SECONDS = Number(process.env.SLUICE_SOAK_SECONDS ?? 20);
const PROCESSES = 3;
const worker = new URL('../fixtures/soak-worker.ts', import.meta.url);
const dir = mkdtempSync(join(tmpdir(), 'sluice-soak-'));
let server: PrivateRedis | undefined;
after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Report {
  outcomes: Record<string, number>;
  unhandled: number;
  uncaught: number;
  reconnects: number;
  stalls: number;
  inFlightAtEnd: number;
  admittedAt: number[];
}

describe('soak', () => {
  it(`3 processes × ${SECONDS} s, all policies, Redis killed and restarted twice: every bound holds`, async () => {
    server = await startRedisServer([
      '--appendonly',
      'yes',
      '--appendfsync',
      'always',
      '--dir',
      dir,
    ]);
    const redis = server;
    const started = Date.now();
    const children = Array.from({ length: PROCESSES }, () =>
      spawn(process.execPath, nodeScript(worker), {
        env: { ...process.env, REDIS_URL: redis.url, SOAK_MS: String(SECONDS * 1000) },
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    );
    const outputs = children.map(async (child) => {
      let text = '';
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (chunk: string) => {
        text += chunk;
      });
      // 'close', not 'exit': the last of its stdout may be read after it exited.
      const [code] = (await once(child, 'close')) as [number | null];
      assert.equal(code, 0, 'a worker exited with an error');
      return JSON.parse(text) as Report;
    });

    // Two outages of 1.5 s, a third and two thirds of the way through.
    const outages: [number, number][] = [];
    for (const at of [1 / 3, 2 / 3]) {
      await sleep(Math.max(0, started + SECONDS * 1000 * at - Date.now()));
      const down = Date.now();
      await redis.kill();
      await sleep(1500);
      await redis.restart();
      outages.push([down, Date.now()]);
    }
    const reports = await Promise.all(outputs);

    const admin = createClient({ url: redis.url, socket: { reconnectStrategy: false } });
    admin.on('error', () => {});
    await admin.connect();
    try {
      const log = await readDecisionLog(admin);
      const violations = checkAdmissions(log);
      const byAlgorithm: Record<string, number> = {};
      const scopes = new Set<string>();
      for (const e of log) {
        const algorithm = algorithmOf(e.key);
        byAlgorithm[algorithm] = (byAlgorithm[algorithm] ?? 0) + 1;
        scopes.add(e.key);
      }
      // Every key the limiter wrote carries a TTL.
      const keys: string[] = [];
      for await (const batch of admin.scanIterator({ MATCH: 'soak:*', COUNT: 1000 })) {
        keys.push(...batch);
      }
      const withoutTtl: string[] = [];
      for (const key of keys) if ((await admin.pTTL(key)) === -1) withoutTtl.push(key);

      const totals: Record<string, number> = {};
      for (const r of reports) {
        for (const [k, v] of Object.entries(r.outcomes)) totals[k] = (totals[k] ?? 0) + v;
      }
      console.log(
        `soak: ${SECONDS} s, ${PROCESSES} processes, outcomes ${JSON.stringify(totals)}, ` +
          `${log.length} admissions logged by Redis over ${scopes.size} scopes ${JSON.stringify(byAlgorithm)}, ` +
          `${violations.length} violations, ${keys.length} keys at the end (${withoutTtl.length} without TTL), ` +
          `reconnect attempts ${reports.map((r) => r.reconnects).join('/')}, stalls ${reports.map((r) => r.stalls).join('/')}, ` +
          `unhandled ${reports.map((r) => r.unhandled).join('/')}, uncaught ${reports.map((r) => r.uncaught).join('/')}`,
      );
      assert.deepEqual(violations.slice(0, 5), [], `${violations.length} admissions over a bound`);
      assert.equal(totals.UNTYPED, undefined, 'every failure is typed');
      for (const r of reports) {
        assert.equal(r.unhandled, 0, 'no unhandled rejection');
        assert.equal(r.uncaught, 0, 'no uncaught exception');
        assert.equal(r.inFlightAtEnd, 0, 'nothing left in flight');
        assert.ok((r.outcomes.SLUICE_UNAVAILABLE ?? 0) > 0, 'each process saw the outages');
        outages.forEach(([, up], i) => {
          const nextDown = outages[i + 1]?.[0] ?? Number.POSITIVE_INFINITY;
          assert.ok(
            r.admittedAt.some((t) => t > up && t < nextDown),
            `admitted again after restart ${i + 1}, without restarting the process`,
          );
        });
      }
      assert.ok(Object.keys(byAlgorithm).length === 5, 'all five policies were exercised');
      assert.ok(scopes.size >= 90, `${scopes.size} scopes`);
      assert.ok(log.length > 1000, `${log.length} admissions`);
      assert.ok(
        reports.reduce((n, r) => n + (r.outcomes.allowed ?? 0), 0) <= log.length,
        'every admission a caller saw was logged by Redis (a timed-out one may be logged only)',
      );
      assert.deepEqual(withoutTtl, [], 'every key has a TTL');
    } finally {
      admin.destroy();
    }
  });
});
