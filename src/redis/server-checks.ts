/**
 * Start-up checks of the Redis a limiter decides on, whatever client it was given: the
 * settings under which a rate limiter silently stops being one.
 *
 * - An eviction policy that can evict quota keys: `allkeys-*`, and `volatile-*` too, since
 *   every sluice key has a TTL. Under memory pressure an evicted key is a fresh quota — an
 *   exhausted scope gets a second full one. `noeviction` refuses writes instead (`OOM` →
 *   `StoreError`), which a fail-closed route answers `503`: never share a quota store with
 *   an evicting cache.
 * - A replica: it refuses every decision (`READONLY`); writes belong to the primary.
 * - A Redis older than {@link MIN_REDIS_VERSION}, the oldest this project tests.
 */
import { callSafely } from '../call-safely.js';
import { isSluiceError, UnavailableError } from '../errors.js';
import { observe } from '../observer.js';
import type { ScriptStore, ServerFacts } from '../stores/store.js';

/** The oldest Redis sluice is tested against: 7.0. */
export const MIN_REDIS_VERSION = '7.0.0';

/** Stable codes of the start-up warnings. */
export type StartupWarningCode =
  | 'SLUICE_EVICTION_POLICY'
  | 'SLUICE_REPLICA'
  | 'SLUICE_REDIS_VERSION'
  | 'SLUICE_CLUSTER_NODE'
  | 'SLUICE_NO_MIN_REPLICAS';

/** One thing a start-up check found wrong; reported once per limiter. */
export interface StartupWarning {
  readonly code: StartupWarningCode;
  readonly message: string;
  /** What was found. */
  readonly facts: ServerFacts;
}

/** The `field:value` lines of an `INFO` reply. */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

/** The facts in an `INFO` reply (default sections: server, replication, memory). */
export function factsFromInfo(text: string): ServerFacts {
  const fields = parseInfo(text);
  return {
    version: fields.get('redis_version') ?? 'unknown',
    role: fields.get('role') ?? 'unknown',
    maxmemoryPolicy: fields.get('maxmemory_policy') ?? 'unknown',
    clusterEnabled: fields.get('cluster_enabled') === '1',
    connectedReplicas: Number(fields.get('connected_slaves') ?? 0),
    minReplicasToWrite: fields.has('min_slaves_good_slaves'),
  };
}

/** Whether `version` (dotted numbers) is older than `minimum`. */
export function olderThan(version: string, minimum: string): boolean {
  const parts = (text: string) => text.split('.').map((part) => Number.parseInt(part, 10) || 0);
  const [a, b] = [parts(version), parts(minimum)];
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const [x, y] = [a[i] ?? 0, b[i] ?? 0];
    if (x !== y) return x < y;
  }
  return false;
}

/**
 * The warnings the facts call for (none for a primary ≥ 7.0 with `noeviction`, and
 * `min-replicas-to-write` where it has replicas). `clusterClient` says whether the limiter's
 * client is a cluster client: a single-node client on a cluster node decides only the slots
 * that node serves (`MOVED` for the rest); `failover` whether its primary is failed over by
 * Sentinel or a Cluster.
 */
export function warningsFor(
  facts: ServerFacts,
  clusterClient = false,
  failover = clusterClient,
): StartupWarning[] {
  const warnings: StartupWarning[] = [];
  const where = facts.node === undefined ? 'Redis' : `Redis node ${facts.node}`;
  if (facts.clusterEnabled === true && !clusterClient) {
    warnings.push({
      code: 'SLUICE_CLUSTER_NODE',
      message:
        'connected to a Redis Cluster node through a single-node client: only the slots this ' +
        'node serves can be decided (the rest fail with MOVED). Use a cluster client ' +
        '(createCluster, or ioredis Redis.Cluster).',
      facts,
    });
  }
  if (/^(allkeys|volatile)-/.test(facts.maxmemoryPolicy)) {
    warnings.push({
      code: 'SLUICE_EVICTION_POLICY',
      message:
        `${where} maxmemory-policy is ${facts.maxmemoryPolicy}: under memory pressure it can ` +
        'evict quota keys (every sluice key has a TTL), and an evicted key is a fresh quota. ' +
        'Use maxmemory-policy noeviction on the Redis that holds quotas.',
      facts,
    });
  }
  if (
    facts.role === 'master' &&
    facts.minReplicasToWrite === false &&
    (failover || (facts.connectedReplicas ?? 0) > 0)
  ) {
    warnings.push({
      code: 'SLUICE_NO_MIN_REPLICAS',
      message:
        `${where} is a primary that can be failed over and accepts writes without ` +
        'min-replicas-to-write: after a failover, planned or not, an old primary that has not ' +
        'learnt it was replaced keeps deciding beside the new one, and its decisions vanish ' +
        'when it is demoted (over-admission). Set min-replicas-to-write 1 and ' +
        'min-replicas-max-lag 1 on every node, and waitForReplicas: 1 on the limiter; it costs ' +
        'a replication round trip per script call, and decisions stop while no replica ' +
        'acknowledges (run two replicas). See docs/cluster.md.',
      facts,
    });
  }
  if (facts.role === 'slave') {
    warnings.push({
      code: 'SLUICE_REPLICA',
      message: `${where} is a replica: it refuses every decision (READONLY). Connect to the primary (or through Sentinel / Cluster).`,
      facts,
    });
  }
  if (facts.version !== 'unknown' && olderThan(facts.version, MIN_REDIS_VERSION)) {
    warnings.push({
      code: 'SLUICE_REDIS_VERSION',
      message: `${where} ${facts.version} is older than ${MIN_REDIS_VERSION}, the oldest sluice is tested against.`,
      facts,
    });
  }
  return warnings;
}

/**
 * Runs the start-up checks of `store` and reports each kind of warning once (for a cluster,
 * naming the first node it concerns) to `onWarning`, or as a process warning. Resolves once
 * they ran; a store with nothing to ask (`MemoryStore`, a custom store) resolves at once.
 *
 * @throws (rejects) the error of the facts' read when no server answered it: an
 *   `UnavailableError`, or a `RedisConfigError` / `StoreError` when Redis refused it. The
 *   limiter's `ready()` reports it; its calls say the same.
 */
export function checkServer(
  store: ScriptStore,
  onWarning: ((warning: StartupWarning) => void) | undefined,
): Promise<void> {
  if (typeof store.serverFacts !== 'function') return Promise.resolve();
  return callSafely(
    () => store.serverFacts?.(),
    () => new UnavailableError('serverFacts returned no promise'),
  ).then(
    (found) => {
      const seen = new Set<string>();
      const all = Array.isArray(found) ? (found as ServerFacts[]) : [found as ServerFacts];
      if (all.length === 0) {
        throw new UnavailableError('Redis unavailable: no primary of the cluster answered INFO');
      }
      for (const facts of all) {
        const failover = store.cluster === true || store.sentinel === true;
        for (const warning of warningsFor(facts, store.cluster === true, failover)) {
          if (seen.has(warning.code)) continue;
          seen.add(warning.code);
          if (onWarning === undefined) {
            process.emitWarning(warning.message, { code: warning.code });
            continue;
          }
          observe('onWarning', () => onWarning(warning));
        }
      }
    },
    (error: unknown) => {
      throw isSluiceError(error)
        ? error
        : new UnavailableError(
            `Redis unavailable: ${error instanceof Error ? error.message : String(error)}`,
            { cause: error },
          );
    },
  );
}
