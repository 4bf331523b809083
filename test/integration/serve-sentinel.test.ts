/**
 * `sluice serve --redis-type SENTINEL` (REDIS_URL `name,host:port,…`, as the reference reads
 * it): decides through the primary the sentinels name.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { configDir, request, rlsClient, startServe } from '../helpers/serve.js';
import { type RedisSentinel, startSentinel } from '../helpers/topology.js';

describe('sluice serve through Sentinel', () => {
  let sentinel: RedisSentinel | undefined;
  before(async () => {
    sentinel = await startSentinel();
  });
  after(async () => {
    await sentinel?.stop();
  });

  it('REDIS_TYPE=SENTINEL, REDIS_URL=name,host:port,…', async () => {
    const s = sentinel as RedisSentinel;
    const url = [s.name, ...s.sentinelRootNodes.map((n) => `${n.host}:${n.port}`)].join(',');
    const dir = configDir({
      'a.yaml':
        'domain: s\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n',
    });
    const server = await startServe(dir, '', [], { REDIS_TYPE: 'SENTINEL', REDIS_URL: url });
    const client = rlsClient(server.grpcPort);
    const req = request('s', [`k=${randomUUID()}`]);
    assert.equal((await client.should(req)).overall_code, 'OK');
    assert.equal((await client.should(req)).overall_code, 'OVER_LIMIT');
    assert.equal(await server.stop(), 0);
  });
});
