/**
 * One API replica of the demo: a `node:http` server with the limiter in front of
 * `POST /orders`, its own Redis connection, `GET /healthz` (not limited) and `GET /metrics`
 * (Prometheus text from `sluice/prometheus`; `501` when the optional peer `prom-client` is
 * not installed).
 *
 * Environment: `REDIS_URL`, `SLUICE_DEMO_SECRET`, `SLUICE_DEMO_NAME`. Started by
 * `sluice demo` with an IPC channel; it reports `{ port }` once listening.
 */
import { createServer } from 'node:http';
import { loadPolicies } from '../config/index.js';
import { withRateLimit } from '../http/node.js';
import { RateLimiter } from '../limiter/rate-limiter.js';
import { connectRedis } from '../redis/node-redis/connect.js';
import { verifiedTenant } from './identity.js';

const secret = process.env.SLUICE_DEMO_SECRET ?? '';
const name = process.env.SLUICE_DEMO_NAME ?? 'replica';
let redisErrors = 0;
// Metrics when prom-client (an optional peer dependency) is installed; the demo runs without.
const metrics = await import('../metrics/prometheus.js').then(
  ({ prometheusMetrics }) => prometheusMetrics(),
  () => undefined,
);
const client = await connectRedis({
  url: process.env.REDIS_URL,
  onError: () => {
    redisErrors++;
  },
  metrics,
});
const limiter = new RateLimiter({
  client,
  namespace: 'sluice-demo',
  // The demo shows exact counts across replicas; on a loaded machine (the demo also runs in
  // the test suite, beside other tests) the first decisions of a cold process can take longer
  // than a production deadline, which would turn a decision into a 503.
  timeoutMs: 1000,
  maxInFlight: 1000,
  metrics,
});
// Policies come from configuration, validated once at start: examples/demo-policies.json,
// which the build copies next to this module (dist/demo/), so the installed package has it.
const policyFile = new URL('./demo-policies.json', import.meta.url);
const policies = loadPolicies(policyFile);
const orders = policies.get('POST/orders');
if (orders === undefined) throw new Error(`${policyFile.pathname} has no POST/orders route`);
let handled = 0;

const createOrder = withRateLimit(
  {
    limiter,
    policy: orders.policy,
    route: orders.route,
    cost: orders.cost,
    identify: (req) => verifiedTenant(secret, req),
    failureMode: orders.failureMode,
    metrics,
  },
  (_req, res) => {
    handled++;
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: true, replica: name }));
  },
);

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'POST' && path === '/orders') return createOrder(req, res);
  if (req.method === 'GET' && path === '/healthz') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ replica: name, handled, redisErrors, limiter: limiter.stats() }));
    return;
  }
  if (req.method === 'GET' && path === '/metrics') {
    if (metrics === undefined) {
      res.writeHead(501, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'metrics need prom-client: npm install prom-client' }));
      return;
    }
    metrics.registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': metrics.registry.contentType });
        res.end(text);
      },
      () => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'metrics_failed' }));
      },
    );
    return;
  }
  res.writeHead(404, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: 'not_found' }));
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : -1 });
});

process.on('disconnect', () => {
  server.close();
  client.destroy();
  process.exit(0);
});
