/**
 * `sluice serve` as a fleet: 3 server processes on one Redis decide one descriptor exactly
 * (and a refused request spends nothing, across processes); an outage mid-load answers
 * UNAVAILABLE within the deadline — never OK, never OVER_LIMIT — and the service recovers
 * when Redis is back; SIGTERM finishes the calls in flight, then exits 0.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTcpProxy } from '../../src/demo/tcp-proxy.js';
import { useRedis } from '../helpers/redis.js';
import { configDir, grpc, request, rlsClient, startServe } from '../helpers/serve.js';

const redis = useRedis();
const RULES = `
domain: fleet
descriptors:
  - key: tight
    rate_limit: { unit: hour, requests_per_unit: 20 }
  - key: wide
    rate_limit: { unit: hour, requests_per_unit: 1000 }
`;

describe('sluice serve: 3 processes on one Redis', () => {
  it('decide one descriptor exactly, all or nothing', async () => {
    const dir = configDir({ 'fleet.yaml': RULES });
    const servers = await Promise.all([0, 1, 2].map(() => startServe(dir, redis.server.url)));
    const clients = servers.map((s) => rlsClient(s.grpcPort));
    const v = randomUUID();
    const req = request('fleet', [`tight=${v}`], [`wide=${v}`]);
    await Promise.all(clients.map((c) => c.check())); // connected
    const answers = await Promise.all(
      Array.from({ length: 90 }, (_, i) => (clients[i % 3] as (typeof clients)[0]).should(req)),
    );
    const ok = answers.filter((a) => a.overall_code === 'OK').length;
    assert.equal(ok, 20);
    assert.equal(answers.filter((a) => a.overall_code === 'OVER_LIMIT').length, 70);
    const check = await clients[0]?.should({
      domain: 'fleet',
      descriptors: [{ entries: [{ key: 'wide', value: v }], hits_addend: { value: 0 } }],
    });
    assert.equal(check?.statuses[0]?.limit_remaining, 1000 - 20, 'refused requests spent nothing');
  });
});

describe('sluice serve: outage and shutdown', () => {
  const proxies: { close(): Promise<void> }[] = [];
  after(async () => {
    for (const p of proxies) await p.close();
  });

  it('an outage mid-load is UNAVAILABLE within the deadline, then it recovers', async () => {
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    proxies.push(proxy);
    const dir = configDir({ 'fleet.yaml': RULES });
    const server = await startServe(dir, `redis://127.0.0.1:${proxy.port}`, ['--timeout-ms', '50']);
    const client = rlsClient(server.grpcPort);
    const req = request('fleet', [`wide=${randomUUID()}`]);
    assert.equal((await client.should(req)).overall_code, 'OK');
    proxy.mode = 'blackhole';
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const started = performance.now();
        try {
          const answer = await client.should(req, 2000);
          return { code: answer.overall_code, ms: performance.now() - started };
        } catch (error) {
          return { code: (error as grpc.ServiceError).code, ms: performance.now() - started };
        }
      }),
    );
    for (const o of outcomes) {
      assert.equal(o.code, grpc.status.UNAVAILABLE, 'never an undecided OK or OVER_LIMIT');
      assert.ok(o.ms < 1000, `answered in ${Math.round(o.ms)} ms`);
    }
    proxy.mode = 'pass';
    const end = Date.now() + 10_000;
    let answer: string | number = '';
    while (Date.now() < end) {
      try {
        answer = (await client.should(req, 1000)).overall_code;
        if (answer === 'OK') break;
      } catch (error) {
        answer = (error as grpc.ServiceError).code;
      }
      await sleep(100);
    }
    assert.equal(answer, 'OK', 'recovered');
    await server.waitFor(/Redis is unreachable[\s\S]*Redis answers again/);
  });

  it('SIGTERM: health watchers see NOT_SERVING, the calls in flight finish, then it exits 0', async () => {
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    proxies.push(proxy);
    const dir = configDir({ 'fleet.yaml': RULES });
    const server = await startServe(dir, `redis://127.0.0.1:${proxy.port}`, [
      '--timeout-ms',
      '3000',
    ]);
    const client = rlsClient(server.grpcPort);
    const req = request('fleet', [`wide=${randomUUID()}`]);
    assert.equal((await client.should(req)).overall_code, 'OK');
    const watch = client.watch();
    proxy.delayMs = 400;
    proxy.mode = 'delay';
    const inFlight = client.should(req, 5000);
    await sleep(100);
    const exited = server.stop();
    assert.equal((await inFlight).overall_code, 'OK');
    const started = Date.now();
    assert.equal(await exited, 0);
    assert.ok(Date.now() - started < 5000, 'the watch did not hold the shutdown open');
    assert.deepEqual(await watch.ended, ['SERVING', 'NOT_SERVING']);
    assert.match(server.stderr(), /shutting down/);
  });
});
