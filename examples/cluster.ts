import { Cluster } from 'ioredis';
import { createCluster } from 'redis';
import { fixedWindow, RateLimiter } from 'sluice';
import { IOREDIS_CLUSTER_OPTIONS } from 'sluice/ioredis';

// A few nodes of the cluster; the clients find the others.
const urls = (process.env.REDIS_CLUSTER_NODES ?? 'redis://127.0.0.1:7000').split(',');
const perTenant = fixedWindow({ name: 'tenant', limit: 100, windowMs: 60_000 });
const orders = fixedWindow({ name: 'orders', limit: 10, windowMs: 60_000 });

// node-redis: no offline queue on any node's connection (else refused).
const nodeRedis = createCluster({
  rootNodes: urls.map((url) => ({ url })),
  defaults: { disableOfflineQueue: true },
});
nodeRedis.on('error', (error) => console.error(`node-redis cluster: ${error.message}`));
await nodeRedis.connect();

// ioredis: IOREDIS_CLUSTER_OPTIONS (merge your own redisOptions into its redisOptions).
const nodes = urls.map((url) => ({ host: new URL(url).hostname, port: Number(new URL(url).port) }));
const ioredis = new Cluster(nodes, { ...IOREDIS_CLUSTER_OPTIONS });
ioredis.on('error', (error) => console.error(`ioredis cluster: ${error.message}`));

// Every key of a tenant is in one slot, so a takeAll of its limits runs on one node, atomically;
// the calls of one turn go as one batch per node.
const tenants = ['acme', 'globex', 'initech'];
for (const [name, client] of [
  ['node-redis', nodeRedis],
  ['ioredis', ioredis],
] as const) {
  const limiter = new RateLimiter({ client });
  // Optional: calls issued before it wait for the same (the client's first connections).
  await limiter.ready();
  const results = await Promise.all(
    tenants.map((tenant) =>
      limiter.takeAll([
        { scope: { tenant }, policy: perTenant },
        { scope: { tenant, route: 'POST/orders' }, policy: orders },
      ]),
    ),
  );
  const left = results.map(
    (r, i) => `${tenants[i]} ${r.decisions.map((d) => d.remaining).join('/')}`,
  );
  console.log(`${name}: ${left.join(', ')} left`);
}

await nodeRedis.close();
await ioredis.quit();
