/**
 * `sluice demo`: three API replicas, as separate processes, share one quota through Redis.
 *
 * 1. Redis: `REDIS_URL` when set; else a private `redis-server` on a free port (stopped at
 *    the end); else a message saying how to get one. A Redis the demo did not start is
 *    never stopped or flushed; each run uses a random tenant.
 * 2. Three replicas connect to Redis through a loopback proxy the demo controls, so that it
 *    can later cut the network path without touching the Redis server itself.
 * 3. 30 concurrent `POST /orders` for one tenant, round robin over the replicas, policy
 *    10 per 1000 ms → exactly 10 admitted.
 * 4. After the window (1100 ms) a request is admitted again.
 * 5. The path to Redis is cut → `503` with `Retry-After: 1` (fail-closed).
 *
 * Each replica serves `GET /metrics` (Prometheus text); after step 3 the demo prints replica
 * #1's non-zero sluice counts from it.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { connectRedis } from '../redis/node-redis/connect.js';
import { issueToken } from './identity.js';
import { hasRedisServer, type PrivateRedis, startRedisServer } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

export interface ReplicaReport {
  readonly replica: number;
  readonly port: number;
  readonly admitted: number;
  readonly limited: number;
  readonly other: number;
}

export interface DemoReport {
  readonly redis: string;
  readonly tenant: string;
  readonly policy: {
    readonly algorithm: 'fixed-window';
    readonly limit: number;
    readonly windowMs: number;
  };
  readonly requests: number;
  readonly admitted: number;
  readonly limited: number;
  readonly perReplica: ReplicaReport[];
  /** A `Retry-After` value seen on a 429, or null when none was limited. */
  readonly retryAfterSeen: string | null;
  readonly restoredAfterWindow: boolean;
  readonly failClosedStatus: number;
  readonly failClosedRetryAfter: string | null;
  readonly pass: boolean;
  readonly failures: string[];
}

/**
 * Raised when no Redis can be found; the message says how to get one. Its `lines` are the
 * message's lines: what is printed of them is for the printer to escape.
 */
export class NoRedisError extends Error {
  readonly lines: readonly string[];

  constructor(...lines: string[]) {
    super(lines.join('\n'));
    this.lines = lines;
  }
}

/** `REDIS_URL`'s host when it is a URL that a Redis answers on; else a `NoRedisError`. */
async function reachable(redisUrl: string): Promise<string> {
  let host: string;
  try {
    host = new URL(redisUrl).host;
  } catch {
    throw new NoRedisError(`REDIS_URL is not a URL: ${JSON.stringify(redisUrl)}`);
  }
  try {
    const client = await connectRedis({ url: redisUrl, reconnect: false, onError: () => {} });
    client.destroy();
  } catch (error) {
    throw new NoRedisError(
      `REDIS_URL (${host}) does not answer: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return host;
}

const LIMIT = 10;
const WINDOW_MS = 1000;
const REQUESTS = 30;
const REPLICAS = 3;

type Cleanup = () => Promise<void> | void;

/**
 * Runs the demo: finds a Redis, starts the replicas behind a proxy to it, sends the
 * concurrent requests, waits out the window, cuts the path to Redis, and reports what each
 * step showed. Everything it started is stopped at the end, in reverse order.
 */
export async function runDemo(log: (line: string) => void = () => {}): Promise<DemoReport> {
  const cleanups: Cleanup[] = [];
  try {
    const redis = await findRedis(cleanups);
    const { proxy, ports, secret } = await startReplicas(redis.url, cleanups);
    const tenant = randomUUID();
    const order = orderer(issueToken(secret, tenant));
    logSetup(log, redis.label, ports, tenant);
    await Promise.all(
      ports.map((port) => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.text())),
    );

    const burst = await concurrentOrders(order, ports);
    logBurst(log, burst);
    log('');
    for (const line of await metricsExcerpt(ports[0] as number)) log(line);

    await sleep(WINDOW_MS + 100);
    const after = await order(ports[0] as number);
    log('');
    log(`After the window (${WINDOW_MS + 100} ms): POST /orders → ${after.status}`);

    await proxy.close();
    const down = await order(ports[1] as number);
    log('');
    log(
      `Redis unreachable (the demo cut the network path): POST /orders → ${down.status}, Retry-After: ${down.retryAfter ?? '(none)'} (fail-closed)`,
    );

    const failures = failuresOf(burst, after, down);
    log('');
    log(failures.length === 0 ? 'PASS' : `FAIL: ${failures.join('; ')}`);
    return {
      redis: redis.label,
      tenant,
      policy: { algorithm: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS },
      requests: REQUESTS,
      admitted: burst.admitted,
      limited: burst.limited,
      perReplica: burst.perReplica,
      retryAfterSeen: burst.retryAfterSeen,
      restoredAfterWindow: after.status === 201,
      failClosedStatus: down.status,
      failClosedRetryAfter: down.retryAfter,
      pass: failures.length === 0,
      failures,
    };
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}

/** `REDIS_URL` when set; else a private redis-server, stopped at the end; else a `NoRedisError`. */
async function findRedis(cleanups: Cleanup[]): Promise<{ url: string; label: string }> {
  const given = process.env.REDIS_URL;
  if (given) return { url: given, label: `REDIS_URL (${await reachable(given)})` };
  if (!hasRedisServer()) {
    throw new NoRedisError(
      'No Redis to talk to: REDIS_URL is not set and redis-server is not installed.',
      'Either install it:   sudo apt-get install -y redis-server',
      'or run one in Docker: docker run -d -p 127.0.0.1:16379:6379 redis:7',
      '                      REDIS_URL=redis://127.0.0.1:16379 npx sluice demo',
      '(in a checkout of the repository: docker compose -f examples/redis.compose.yaml up -d)',
    );
  }
  const redis: PrivateRedis = await startRedisServer();
  cleanups.push(() => redis.stop());
  return {
    url: redis.url,
    label: `private redis-server on 127.0.0.1:${redis.port} (pid ${redis.pid}, stopped at the end)`,
  };
}

/**
 * Starts the replicas, each connected to Redis through a loopback proxy the demo controls,
 * so that it can later cut the network path without touching the Redis server itself.
 */
async function startReplicas(
  redisUrl: string,
  cleanups: Cleanup[],
): Promise<{ proxy: TcpProxy; ports: number[]; secret: string }> {
  const upstream = new URL(redisUrl);
  const proxy: TcpProxy = await startTcpProxy(upstream.hostname, Number(upstream.port || 6379));
  cleanups.push(() => proxy.close());
  const viaProxy = new URL(redisUrl);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);

  const secret = randomBytes(32).toString('hex');
  const children: ChildProcess[] = [];
  cleanups.push(() => {
    for (const child of children) child.kill('SIGKILL');
  });
  const ports = await Promise.all(
    Array.from({ length: REPLICAS }, (_, i) =>
      startReplica(i + 1, viaProxy.href, secret, children),
    ),
  );
  return { proxy, ports, secret };
}

function logSetup(log: (line: string) => void, redis: string, ports: number[], tenant: string) {
  log('sluice demo: three API replicas share one quota through Redis');
  log(`  Redis:    ${redis}`);
  log(`  Replicas: ${ports.map((port, i) => `#${i + 1} 127.0.0.1:${port}`).join(', ')}`);
  log(`  Policy:   fixed window, ${LIMIT} per ${WINDOW_MS} ms on POST/orders; tenant ${tenant}`);
  log('  Metrics:  GET /metrics on each replica (Prometheus text)');
}

/** One `POST /orders`'s answer. */
interface OrderResult {
  readonly port: number;
  readonly status: number;
  readonly retryAfter: string | null;
}

type Order = (port: number) => Promise<OrderResult>;

/** Sends `POST /orders` to a replica with the tenant's token. */
function orderer(token: string): Order {
  return (port) =>
    fetch(`http://127.0.0.1:${port}/orders`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    }).then(async (res) => {
      await res.arrayBuffer();
      return { port, status: res.status, retryAfter: res.headers.get('retry-after') };
    });
}

/** What the concurrent requests got, in total and per replica. */
interface Burst {
  readonly perReplica: ReplicaReport[];
  readonly admitted: number;
  readonly limited: number;
  readonly retryAfterSeen: string | null;
}

/** All the requests at once, round robin over the replicas. */
async function concurrentOrders(order: Order, ports: readonly number[]): Promise<Burst> {
  const results = await Promise.all(
    Array.from({ length: REQUESTS }, (_, i) => order(ports[i % REPLICAS] as number)),
  );
  const perReplica = ports.map((port, i) => {
    const mine = results.filter((r) => r.port === port);
    return {
      replica: i + 1,
      port,
      admitted: mine.filter((r) => r.status === 201).length,
      limited: mine.filter((r) => r.status === 429).length,
      other: mine.filter((r) => r.status !== 201 && r.status !== 429).length,
    };
  });
  return {
    perReplica,
    admitted: perReplica.reduce((sum, r) => sum + r.admitted, 0),
    limited: perReplica.reduce((sum, r) => sum + r.limited, 0),
    retryAfterSeen: results.find((r) => r.status === 429)?.retryAfter ?? null,
  };
}

function logBurst(log: (line: string) => void, burst: Burst): void {
  log('');
  log(`${REQUESTS} concurrent POST /orders, round robin over ${REPLICAS} replicas:`);
  for (const r of burst.perReplica) {
    log(
      `  replica #${r.replica}: ${r.admitted} admitted (201), ${r.limited} limited (429)${r.other ? `, ${r.other} other` : ''}`,
    );
  }
  log(
    `  total:      ${burst.admitted} admitted, ${burst.limited} limited (expected exactly ${LIMIT} admitted)`,
  );
  log(`  a limited response carried Retry-After: ${burst.retryAfterSeen ?? '(none)'}`);
}

/** Each expectation that did not hold, in words. */
function failuresOf(burst: Burst, after: OrderResult, down: OrderResult): string[] {
  const failures: string[] = [];
  const { admitted, limited } = burst;
  if (admitted !== LIMIT) failures.push(`admitted ${admitted}, expected ${LIMIT}`);
  if (limited !== REQUESTS - LIMIT) {
    failures.push(`limited ${limited}, expected ${REQUESTS - LIMIT}`);
  }
  if (after.status !== 201) failures.push(`after the window: status ${after.status}, expected 201`);
  if (down.status !== 503) failures.push(`Redis unreachable: status ${down.status}, expected 503`);
  if (down.retryAfter !== '1') {
    failures.push(`Redis unreachable: Retry-After ${down.retryAfter}, expected 1`);
  }
  return failures;
}

/** Lines about replica `port`'s `GET /metrics`: its non-zero sluice counts. */
async function metricsExcerpt(port: number): Promise<string[]> {
  const url = `http://127.0.0.1:${port}/metrics`;
  const res = await fetch(url).catch(() => undefined);
  const text = res === undefined ? '' : await res.text();
  if (res?.status !== 200) {
    return [`GET ${url} → ${res?.status ?? 'no answer'} (metrics need prom-client installed)`];
  }
  const counts = text
    .split('\n')
    .filter((line) => /^sluice_(decisions|cached_denials|http_requests)_total\{/.test(line))
    .filter((line) => !line.endsWith(' 0'));
  return [
    `Replica #1, GET ${url} (Prometheus text; non-zero counts):`,
    ...counts.map((l) => `  ${l}`),
  ];
}

function startReplica(
  n: number,
  redisUrl: string,
  secret: string,
  children: ChildProcess[],
): Promise<number> {
  const child = fork(new URL('./replica.js', import.meta.url), [], {
    env: {
      ...process.env,
      REDIS_URL: redisUrl,
      SLUICE_DEMO_SECRET: secret,
      SLUICE_DEMO_NAME: `#${n}`,
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`replica #${n} did not start within 10 s`)),
      10_000,
    );
    child.once('message', (message: { port?: number }) => {
      clearTimeout(timer);
      if (typeof message?.port === 'number' && message.port > 0) resolve(message.port);
      else reject(new Error(`replica #${n} failed to listen`));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`replica #${n} exited with code ${code} before listening`));
    });
  });
}
