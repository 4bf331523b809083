/**
 * The options of a `RateLimiter`, checked once at construction into its settings: every
 * option has a unit, a default and a range, and a bad or unknown option is an
 * `InvalidInputError` naming it (`options.<name>`).
 */
import { MAX_BATCH_SIZE, MAX_TIMER_MS } from '../bounds.js';
import { InvalidInputError } from '../errors.js';
import type { DecisionEvent, Metrics } from '../metrics/types.js';
import { type AcceptedClient, storeFor } from '../redis/select.js';
import type { StartupWarning } from '../redis/server-checks.js';
import type { ScriptStore } from '../stores/store.js';
import { optionalPositiveInteger, readProperty, rejectUnknownKeys } from '../validate.js';
import { performanceNow } from './coalescer.js';

/** Options of `RateLimiter`. Give exactly one of `client` and `store`. */
export interface RateLimiterOptions {
  /**
   * The Redis to decide on: a connection from `connectRedis()` (`sluice/node-redis`), or a
   * connected client of your own — node-redis v6 `createClient()`, `createCluster()` or
   * `createSentinel()`, an ioredis (or iovalkey) `Redis` or `Cluster`, or a Valkey GLIDE
   * `GlideClient` or `GlideClusterClient`. Recognised by its shape; anything else is an
   * `InvalidInputError`. A client of your own must have no offline queue
   * (`disableOfflineQueue: true`; ioredis: `enableOfflineQueue: false`,
   * `maxRetriesPerRequest: 0` and `autoResendUnfulfilledCommands: false`; a node-redis
   * sentinel: also `maxCommandRediscovers: 0`; a GLIDE cluster client:
   * `recoveryRequestsQueueSize: 0`), so that calls fail at once while Redis is
   * unreachable and a call that may have run is never sent again.
   */
  readonly client?: AcceptedClient;
  /** A store to use instead of `client`, e.g. a `MemoryStore`. */
  readonly store?: ScriptStore;
  /**
   * Only with a node-redis v6 `createClient()` or an ioredis (iovalkey) `Redis` of your own:
   * whether the limiter's scripts go over a connection of sluice's own beside it, set up from
   * the client's options (host or Unix socket, TLS, credentials, database), which writes each
   * script the moment it is made. node-redis writes a turn's commands together, after the
   * turn, so the process and Redis would take turns instead of overlapping; ioredis builds a
   * `Command` of every argument of every call (bench/PROFILE.md). It opens when the client is
   * ready, ends when the client ends, is watched for stalls, never keeps the process alive,
   * and while it is down the scripts go over the client. It is not made when the client's
   * options cannot be copied exactly (a streaming credentials provider; an ioredis Sentinel
   * client, custom `Connector` or `keyPrefix`), and it does not follow a `SELECT` sent on the
   * client later (give the database in the client's options). It counts toward the server's
   * `maxclients`. Default true; with any other client it is an `InvalidInputError`.
   */
  readonly scriptConnection?: boolean;
  /**
   * First part of every key, to keep kinds of quota apart in one Redis: 1–64 characters of
   * `[A-Za-z0-9._:-]` (no braces, so it can never form a hash tag). Default `"rate"`.
   */
  readonly namespace?: string;
  /**
   * Deadline of each call in milliseconds, from `take` to its settlement, including a
   * script reload after NOSCRIPT: a positive safe integer. Default 150. A call that times
   * out may still have consumed quota on the server; it is never refunded.
   */
  readonly timeoutMs?: number;
  /**
   * Most calls in flight at once; a call over the cap rejects at once with
   * `OverloadError` — or with `UnavailableError` when the calls in flight are waiting on a
   * Redis that stopped answering (the oldest has waited longer than `timeoutMs`). A call
   * stays in flight until Redis answers, the connection fails, or `stallTimeoutMs` passes,
   * even after its deadline, so the cap also bounds work stuck in the client. A positive
   * safe integer. Default 1000.
   */
  readonly maxInFlight?: number;
  /**
   * How long a script call may stay unanswered, in ms, before the limiter gives up on it: its
   * callers whose deadline has not passed get an `UnavailableError`, its `maxInFlight` slots
   * are freed, and its node (the one server, or a cluster node) counts as stalled — until
   * the node answers again, one call at a time is sent to it as a probe and every other
   * call fails at once with an `UnavailableError`, so nothing piles up in the client while a
   * connection answers nothing. No call holds a slot for longer. An integer from
   * `timeoutMs` to 2,147,483,647. Default: 2000, or `timeoutMs` when that is longer.
   */
  readonly stallTimeoutMs?: number;
  /**
   * Give a decision only once this many replicas have received what it wrote: the store
   * sends Redis `WAIT` right behind each script call, on its connection, and a call whose
   * writes too few replicas acknowledge within half of `timeoutMs` fails with
   * `UnavailableError` (it ran; nobody is told it was admitted). After such a call, the
   * node's calls fail at once with `UnavailableError` (none runs) while one at a time probes
   * until the replicas acknowledge again. With a replica promoted by Sentinel or a Cluster
   * failover — planned or not — a decision a caller was told of is then never forgotten, so
   * a failover cannot over-admit. It costs a replication round trip per script call, and
   * decisions stop while fewer replicas answer. An integer from 0 (off, the default) to 16;
   * needs a Redis store (not `MemoryStore`). See docs/cluster.md.
   */
  readonly waitForReplicas?: number;
  /**
   * Most items coalesced into one script call: calls issued in the same event-loop turn
   * are sent together, in batches of a share of what is in flight (see `coalescer.ts`).
   * 1 sends every take alone. Whatever this says, a batch also holds at most about 0.5 ms
   * of estimated Redis work, and a `takeAll` is never split. A positive safe integer up to
   * 1024. Default 128.
   */
  readonly maxBatchSize?: number;
  /**
   * The local denial cache: a scope whose quota is used up until a known time is denied in
   * process until then, with no Redis call, where that is exact for its policy. `false`
   * turns it off; `maxEntries` (a positive safe integer, default 10,000) bounds its memory.
   */
  readonly denialCache?: false | { readonly maxEntries?: number };
  /**
   * A metrics sink (`prometheusMetrics()` from `sluice/prometheus`, `openTelemetryMetrics()`
   * from `sluice/opentelemetry`, or your own `Metrics`): every decided policy, its latency
   * and the calls in flight. Unset: nothing is measured.
   */
  readonly metrics?: Metrics;
  /**
   * Called with each decided policy's `DecisionEvent` (outcome, policy name, route,
   * latency, the call's `requestId`), e.g. to log it. An error it throws is reported as a
   * process warning and changes no decision.
   */
  readonly onDecision?: (event: DecisionEvent) => void;
  /**
   * Put the tenant in decision events (`onDecision` only; metrics never carry it). Default
   * `false`: tenants are often personal data, log them only where that is allowed.
   */
  readonly eventTenant?: boolean;
  /**
   * Receives what the start-up checks find wrong with the Redis behind `client` (an
   * eviction policy that can evict quota keys, a replica, a Redis older than 7.0), once per
   * limiter, shortly after construction. Default: a process warning
   * (`process.emitWarning`, with the warning's `code`).
   */
  readonly onWarning?: (warning: StartupWarning) => void;
  /**
   * Most `wait` and `schedule` calls waiting at once in this limiter; one more is refused at
   * once, without a Redis call (counted as `waitOverflow`). A positive safe integer up to
   * 1,000,000. Default 10,000.
   */
  readonly maxWaiters?: number;
}

/** A limiter's options, checked, with their defaults. */
export interface LimiterSettings {
  readonly store: ScriptStore;
  readonly namespace: string;
  readonly timeoutMs: number;
  readonly maxInFlight: number;
  readonly maxBatchSize: number;
  readonly stallTimeoutMs: number;
  /** Replicas to wait for after each script call (0: none). */
  readonly waitForReplicas: number;
  /** The denial cache's bound; undefined when it is off. */
  readonly denialCacheEntries: number | undefined;
  /** The store's clock (ms): what times the denial cache and batches. */
  readonly clock: () => number;
  readonly metrics: Metrics | undefined;
  readonly onDecision: ((event: DecisionEvent) => void) | undefined;
  readonly eventTenant: boolean;
  readonly onWarning: ((warning: StartupWarning) => void) | undefined;
  readonly maxWaiters: number;
}

const NAMESPACE = /^[A-Za-z0-9._:-]{1,64}$/;
const OPTION_NAMES = [
  'client',
  'store',
  'scriptConnection',
  'namespace',
  'timeoutMs',
  'maxInFlight',
  'maxBatchSize',
  'stallTimeoutMs',
  'waitForReplicas',
  'denialCache',
  'metrics',
  'onDecision',
  'eventTenant',
  'onWarning',
  'maxWaiters',
] as const;

/**
 * Checks `options` (reading each once) into settings.
 *
 * @throws {InvalidInputError} for a missing or ambiguous store, an unknown option, or an
 *   option out of its range.
 */
export function readOptions(options: RateLimiterOptions): LimiterSettings {
  const read = (name: string) => readProperty(options, name, 'options');
  if (typeof options === 'object' && options !== null) {
    rejectUnknownKeys(options, OPTION_NAMES, 'options');
  }
  const store = readStore(read('client'), read('store'), read('scriptConnection'));
  const namespace = read('namespace') ?? 'rate';
  if (typeof namespace !== 'string' || !NAMESPACE.test(namespace)) {
    throw new InvalidInputError(
      'options.namespace',
      '1–64 characters of [A-Za-z0-9._:-]',
      namespace,
    );
  }
  const maxInFlight = optionalPositiveInteger('options.maxInFlight', read('maxInFlight'), 1000);
  const timeoutMs = optionalPositiveInteger(
    'options.timeoutMs',
    read('timeoutMs'),
    150,
    MAX_TIMER_MS,
  );
  const maxBatchSize = optionalPositiveInteger(
    'options.maxBatchSize',
    read('maxBatchSize'),
    128,
    MAX_BATCH_SIZE,
  );
  const stallTimeoutMs = readStallTimeout(read('stallTimeoutMs'), timeoutMs);
  const waitForReplicas = readWaitForReplicas(read('waitForReplicas'), store);
  const denialCacheEntries = readDenialCache(read('denialCache'));
  const clock = typeof store.clock === 'function' ? store.clock : performanceNow;
  const metrics = readMetrics(read('metrics'));
  const onDecision = readFunction('onDecision', read('onDecision'));
  const eventTenant = read('eventTenant');
  if (eventTenant !== undefined && typeof eventTenant !== 'boolean') {
    throw new InvalidInputError('options.eventTenant', 'true or false', eventTenant);
  }
  const onWarning = readFunction('onWarning', read('onWarning'));
  const maxWaiters = optionalPositiveInteger(
    'options.maxWaiters',
    read('maxWaiters'),
    10_000,
    1_000_000,
  );
  return {
    store,
    namespace,
    timeoutMs,
    maxInFlight,
    maxBatchSize,
    stallTimeoutMs,
    waitForReplicas,
    denialCacheEntries,
    clock,
    metrics,
    onDecision: onDecision as LimiterSettings['onDecision'],
    eventTenant: eventTenant === true,
    onWarning: onWarning as LimiterSettings['onWarning'],
    maxWaiters,
  };
}

/** `stallTimeoutMs`: from `timeoutMs` to the timer maximum; by default max(2000, timeoutMs). */
function readStallTimeout(given: unknown, timeoutMs: number): number {
  const stallTimeoutMs = given ?? Math.max(2000, timeoutMs);
  if (
    typeof stallTimeoutMs !== 'number' ||
    !Number.isSafeInteger(stallTimeoutMs) ||
    stallTimeoutMs < timeoutMs ||
    stallTimeoutMs > MAX_TIMER_MS
  ) {
    throw new InvalidInputError(
      'options.stallTimeoutMs',
      `an integer from timeoutMs (${timeoutMs}) to ${MAX_TIMER_MS}`,
      stallTimeoutMs,
    );
  }
  return stallTimeoutMs;
}

/** `waitForReplicas`: 0–16, and above 0 only with a store that can wait for replicas. */
function readWaitForReplicas(given: unknown, store: ScriptStore): number {
  const waitForReplicas = given ?? 0;
  if (
    typeof waitForReplicas !== 'number' ||
    !Number.isInteger(waitForReplicas) ||
    waitForReplicas < 0 ||
    waitForReplicas > 16
  ) {
    throw new InvalidInputError(
      'options.waitForReplicas',
      'an integer from 0 to 16',
      waitForReplicas,
    );
  }
  if (waitForReplicas > 0 && store.replicaAcks !== true) {
    throw new InvalidInputError(
      'options.waitForReplicas',
      '0 with a store that cannot wait for replicas (such as MemoryStore)',
      waitForReplicas,
    );
  }
  return waitForReplicas;
}

/** Exactly one of `client` and `store`; a client is recognised into its store. */
function readStore(client: unknown, store: unknown, scriptConnection: unknown): ScriptStore {
  if ((client === undefined) === (store === undefined)) {
    throw new InvalidInputError('options.client', 'given alone, or options.store alone', client);
  }
  if (scriptConnection !== undefined && typeof scriptConnection !== 'boolean') {
    throw new InvalidInputError('options.scriptConnection', 'true or false', scriptConnection);
  }
  if (store === undefined) return storeFor(client, scriptConnection);
  if (scriptConnection !== undefined) {
    throw new InvalidInputError(
      'options.scriptConnection',
      'absent with options.store (it applies to a node-redis client)',
      scriptConnection,
    );
  }
  if (typeof readProperty(store, 'evalScript', 'options.store') !== 'function') {
    throw new InvalidInputError('options.store', 'a ScriptStore', store);
  }
  return store as ScriptStore;
}

/** The `denialCache` option: its bound, or undefined when it is off. */
function readDenialCache(cache: unknown): number | undefined {
  if (cache === false) return undefined;
  if (cache !== undefined && (typeof cache !== 'object' || cache === null)) {
    throw new InvalidInputError('options.denialCache', 'false or { maxEntries }', cache);
  }
  if (cache !== undefined) rejectUnknownKeys(cache, ['maxEntries'], 'options.denialCache');
  return optionalPositiveInteger(
    'options.denialCache.maxEntries',
    cache === undefined ? undefined : readProperty(cache, 'maxEntries', 'options.denialCache'),
    10_000,
  );
}

/** The `metrics` option: absent, or an object with the four methods of `Metrics`. */
function readMetrics(value: unknown): Metrics | undefined {
  if (value === undefined) return undefined;
  for (const method of ['decision', 'request', 'redisEvent', 'attach']) {
    if (typeof readProperty(value, method, 'options.metrics') !== 'function') {
      throw new InvalidInputError(
        'options.metrics',
        'a Metrics (prometheusMetrics(), openTelemetryMetrics(), or an object with decision, request, redisEvent and attach)',
        value,
      );
    }
  }
  return value as Metrics;
}

function readFunction(name: string, value: unknown): unknown {
  if (value !== undefined && typeof value !== 'function') {
    throw new InvalidInputError(`options.${name}`, 'a function', value);
  }
  return value;
}
