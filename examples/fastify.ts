import Fastify, { type FastifyRequest } from 'fastify';
import { fixedWindow, RateLimiter } from 'sluice';
import { fastifyRateLimit } from 'sluice/fastify'; // Fastify's types, typed config.rateLimit
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });
const orders = fixedWindow({ limit: 10, windowMs: 60_000 });

// Stands in for your authentication (see the node:http example).
const tenants = new Map([
  ['token-of-acme', 'acme'],
  ['token-of-globex', 'globex'],
]);
const verifiedTenantOf = (request: FastifyRequest) =>
  tenants.get(/^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1] ?? '');

const app = Fastify();
app.addHook('onClose', () => redis.close()); // app.close() closes the Redis connection too
await app.register(fastifyRateLimit, { limiter, identify: verifiedTenantOf });
// Routes opt in with config.rateLimit; this quota is named "POST/orders/:id".
app.post('/orders/:id', { config: { rateLimit: { policy: orders } } }, async (_request, reply) =>
  reply.code(201).send({ created: true }),
);
await app.listen({ port: Number(process.env.PORT ?? 3000) });

const shutdown = () => void app.close();
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
