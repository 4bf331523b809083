/**
 * `sluice serve --redis-type CLUSTER` on a Redis Cluster of 3 primaries: a request's
 * descriptors are one atomic call in one hash slot (the domain's), in sluice's counting and in
 * the reference's, for domains spread over every primary.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { configDir, request, rlsClient, startServe } from '../helpers/serve.js';
import { type RedisCluster, startRedisCluster } from '../helpers/topology.js';

const DOMAINS = Array.from({ length: 6 }, (_, i) => `d${i}`);
const RULES = DOMAINS.map(
  (domain) => `domain: ${domain}
descriptors:
  - key: a
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: b
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: c
    rate_limit: { unit: minute, requests_per_unit: 10 }
`,
);

describe('sluice serve on a Redis Cluster', () => {
  let cluster: RedisCluster | undefined;
  before(async () => {
    cluster = await startRedisCluster({ replicas: 0 });
  });
  after(async () => {
    await cluster?.stop();
  });

  for (const compat of ['sluice', 'reference']) {
    it(`${compat} counting: every domain's descriptors decided together`, async () => {
      const files = Object.fromEntries(RULES.map((text, i) => [`d${i}.yaml`, text]));
      const nodes = (cluster as RedisCluster).rootNodes.map((n) => n.url.replace('redis://', ''));
      const server = await startServe(configDir(files), nodes.join(','), [
        '--redis-type',
        'CLUSTER',
        '--compat',
        compat,
      ]);
      const client = rlsClient(server.grpcPort);
      for (const domain of DOMAINS) {
        const v = randomUUID();
        const req = request(domain, [`a=${v}`], [`b=${v}`], [`c=${v}`]);
        assert.equal((await client.should(req)).overall_code, 'OK', domain);
        assert.equal((await client.should(req)).overall_code, 'OK', domain);
        const third = await client.should(req);
        assert.equal(third.overall_code, 'OVER_LIMIT', domain);
        const b = await client.should({
          domain,
          descriptors: [{ entries: [{ key: 'b', value: v }], hits_addend: { value: 0 } }],
        });
        // The refused request spent b's quota in the reference's counting only.
        assert.equal(b.statuses[0]?.limit_remaining, compat === 'sluice' ? 8 : 7, domain);
      }
      assert.equal(await server.stop(), 0);
    });
  }
});
