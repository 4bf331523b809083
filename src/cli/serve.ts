/**
 * `sluice serve`: Envoy's global rate limit service (src/serve/), run from the command line.
 * Redis as the reference reads it — `REDIS_TYPE` (`SINGLE`, `CLUSTER`, `SENTINEL`) and
 * `REDIS_URL` (`host:port`, or a `redis://`/`rediss://` URL; for a cluster, nodes separated
 * by commas; for Sentinel, `name,host:port,…`), `REDIS_AUTH`, `REDIS_TLS` — or
 * `--redis-url`/`--redis-type`. Runs until SIGTERM or SIGINT, then shuts down gracefully:
 * stops accepting calls, finishes those in flight, closes Redis.
 */
import type { AcceptedClient } from '../redis/select.js';
import type { Compat } from '../serve/settings.js';
import { CliError, EXIT } from './exit.js';
import { printError } from './output.js';

export interface ServeOptions {
  readonly config?: string;
  readonly grpcPort?: number;
  readonly httpPort?: number;
  readonly host?: string;
  readonly redisUrl?: string;
  readonly redisType?: string;
  readonly compat?: Compat;
  readonly timeoutMs?: number;
  readonly maxInFlight?: number;
  readonly namespace?: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** A `host:port` of the reference's REDIS_URL as a URL, with REDIS_AUTH and REDIS_TLS. */
export function redisUrlOf(address: string, env: Env): string {
  if (/^rediss?:\/\//.test(address)) return address;
  const auth = env.REDIS_AUTH ? `${encodeAuth(env.REDIS_AUTH)}@` : '';
  const scheme = /^(1|t|true)$/i.test(env.REDIS_TLS ?? '') ? 'rediss' : 'redis';
  return `${scheme}://${auth}${address}`;
}

/** REDIS_AUTH is `password` or `user:password`. */
function encodeAuth(auth: string): string {
  const at = auth.indexOf(':');
  return at < 0
    ? `:${encodeURIComponent(auth)}`
    : `${encodeURIComponent(auth.slice(0, at))}:${encodeURIComponent(auth.slice(at + 1))}`;
}

interface Connected {
  readonly client: AcceptedClient;
  close(): Promise<void>;
}

async function connect(type: string, address: string, env: Env): Promise<Connected> {
  const onError = throttled((error: Error) => printError(`sluice serve: Redis: ${error.message}`));
  if (type === 'SINGLE') {
    const { connectRedis } = await import('../redis/node-redis/connect.js');
    const connection = await connectRedis({ url: redisUrlOf(address, env), onError });
    return { client: connection, close: () => connection.close() };
  }
  const redis = await import('redis');
  if (type === 'CLUSTER') {
    const cluster = redis.createCluster({
      rootNodes: address.split(',').map((node) => ({ url: redisUrlOf(node.trim(), env) })),
      defaults: { disableOfflineQueue: true },
    });
    cluster.on('error', onError);
    await cluster.connect();
    return { client: cluster as unknown as AcceptedClient, close: () => cluster.close() };
  }
  if (type === 'SENTINEL') {
    const [name, ...nodes] = address.split(',').map((part) => part.trim());
    if (name === undefined || name === '' || nodes.length === 0) {
      throw new CliError('REDIS_URL for SENTINEL is "name,host:port[,host:port…]"', EXIT.usage);
    }
    const sentinel = redis.createSentinel({
      name,
      sentinelRootNodes: nodes.map((node) => {
        const at = node.lastIndexOf(':');
        return { host: node.slice(0, at), port: Number(node.slice(at + 1)) };
      }),
      nodeClientOptions: { disableOfflineQueue: true },
    });
    sentinel.on('error', onError);
    await sentinel.connect();
    return { client: sentinel as unknown as AcceptedClient, close: () => sentinel.close() };
  }
  throw new CliError(
    `REDIS_TYPE must be SINGLE, CLUSTER or SENTINEL; received ${JSON.stringify(type)}`,
    EXIT.usage,
  );
}

/** One line per distinct error, at most one a second. */
function throttled(write: (error: Error) => void): (error: Error) => void {
  let last = 0;
  return (error) => {
    const now = Date.now();
    if (now - last < 1000) return;
    last = now;
    write(error);
  };
}

/** Runs the service until SIGTERM/SIGINT; resolves the exit status. */
export async function serve(options: ServeOptions): Promise<number> {
  const env = process.env;
  const type = (options.redisType ?? env.REDIS_TYPE ?? 'SINGLE').toUpperCase();
  const address = options.redisUrl ?? env.REDIS_URL ?? '127.0.0.1:6379';
  const { createRateLimitService, MissingPeerError } = await import('../serve/index.js');
  let redis: Connected;
  try {
    redis = await connect(type, address, env);
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(`cannot connect to Redis: ${(error as Error).message}`, EXIT.usage);
  }
  let service: Awaited<ReturnType<typeof createRateLimitService>>;
  try {
    service = await createRateLimitService({
      client: redis.client,
      config: options.config,
      compat: options.compat,
      host: options.host,
      grpcPort: options.grpcPort ?? envPort(env, 'GRPC_PORT', 8081),
      httpPort: options.httpPort ?? envPort(env, 'PORT', 8080),
      timeoutMs: options.timeoutMs ?? envPort(env, 'SLUICE_TIMEOUT_MS', undefined),
      maxInFlight: options.maxInFlight ?? envPort(env, 'SLUICE_MAX_IN_FLIGHT', undefined),
      namespace: options.namespace,
      log: (line) => printError(line),
    });
  } catch (error) {
    await redis.close().catch(() => {});
    if (error instanceof MissingPeerError) throw new CliError(error.message, EXIT.usage);
    throw new CliError((error as Error).message, EXIT.usage);
  }
  printError(
    `sluice serve: gRPC on port ${service.grpcPort}, HTTP on port ${service.httpPort} (counting: ${options.compat ?? env.SLUICE_COMPAT ?? 'sluice'})`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  printError('sluice serve: shutting down (finishing the calls in flight)');
  await service.close();
  await redis.close().catch(() => {});
  return EXIT.ok;
}

/** An environment variable's port or count; its name in the error. */
function envPort<T extends number | undefined>(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: T,
): number | T {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 2_147_483_647) {
    throw new CliError(
      `${name} must be an integer from 0 to 2147483647; received ${JSON.stringify(value)}`,
      EXIT.usage,
    );
  }
  return n;
}
