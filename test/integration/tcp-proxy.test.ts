/**
 * The fault proxy behaves like TCP on a live connection: it never reorders or loses bytes.
 * Replies held by `'delay'` keep their place ahead of later ones, and bytes held by a black
 * hole are delivered in order when it ends — otherwise a later reply would be matched to an
 * earlier command (one tenant's decision handed to another).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTcpProxy, type TcpProxy } from '../../src/demo/tcp-proxy.js';
import { useRedis } from '../helpers/redis.js';

const redis = useRedis();
const proxies: TcpProxy[] = [];
after(async () => {
  for (const proxy of proxies) await proxy.close();
});

async function proxiedClient() {
  const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
  proxies.push(proxy);
  // One connection (node-redis's): `fastPath` would add the limiter's script connection.
  const client = await redis.client({
    url: `redis://127.0.0.1:${proxy.port}`,
    stallTimeoutMs: 0,
    fastPath: false,
  });
  return { proxy, client };
}

describe('fault proxy', () => {
  it('delay, then pass: replies keep their order', async () => {
    const { proxy, client } = await proxiedClient();
    proxy.delayMs = 300;
    proxy.mode = 'delay';
    const a = client.client.sendCommand(['ECHO', 'A']);
    await sleep(50);
    proxy.mode = 'pass';
    const b = client.client.sendCommand(['ECHO', 'B']);
    assert.deepEqual(await Promise.all([a, b]), ['A', 'B']);
    client.destroy();
  });

  it('delay holds each reply delayMs from its arrival, not after the previous one', async () => {
    const { proxy, client } = await proxiedClient();
    proxy.delayMs = 200;
    proxy.mode = 'delay';
    const started = performance.now();
    const latencies = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        await sleep(i * 50);
        const sent = performance.now();
        await client.client.sendCommand(['PING']);
        return performance.now() - sent;
      }),
    );
    assert.ok(
      latencies.every((ms) => ms >= 190 && ms < 600),
      `latencies ${latencies.map((ms) => ms.toFixed(0)).join(', ')} ms`,
    );
    assert.ok(performance.now() - started < 1500);
    client.destroy();
  });

  it('black hole, then pass: held bytes are delivered, in order', async () => {
    const { proxy, client } = await proxiedClient();
    proxy.mode = 'blackhole';
    const a = client.client.sendCommand(['ECHO', 'A']);
    await sleep(100);
    proxy.mode = 'pass';
    const b = client.client.sendCommand(['ECHO', 'B']);
    assert.deepEqual(await Promise.all([a, b]), ['A', 'B']);
    client.destroy();
  });

  it('counts its open connections', async () => {
    const { proxy, client } = await proxiedClient();
    assert.equal(proxy.connections, 1);
    client.destroy();
    await sleep(100);
    assert.equal(proxy.connections, 0);
  });
});
