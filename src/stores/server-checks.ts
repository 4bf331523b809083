/**
 * Start-up checks of the Redis a limiter decides on, whatever client it was given: the
 * settings under which a rate limiter silently stops being one.
 *
 * - An eviction policy that can evict quota keys: `allkeys-*`, and `volatile-*` too, since
 *   every sluice key has a TTL. Under memory pressure an evicted key is a fresh quota — an
 *   exhausted scope gets a second full one (measured: 97–99 % of exhausted scopes under
 *   `allkeys-lru`). `noeviction` refuses writes instead (`OOM` → `StoreError`), which a
 *   fail-closed route answers `503`. S22: never share a quota store with an evicting cache.
 * - A replica: it refuses every decision (`READONLY`); writes belong to the primary.
 * - A Redis older than {@link MIN_REDIS_VERSION}, the oldest this project tests.
 */

/** The oldest Redis sluice is tested against: 7.0. */
export const MIN_REDIS_VERSION = '7.0.0';

/** What a start-up check found about the server. */
export interface ServerFacts {
  /** `redis_version`, e.g. `"7.0.15"`. */
  readonly version: string;
  /** `role`: `"master"` or `"slave"` (a replica). */
  readonly role: string;
  /** `maxmemory_policy`, e.g. `"noeviction"`. */
  readonly maxmemoryPolicy: string;
  /** `cluster_enabled`: the server is a Redis Cluster node. */
  readonly clusterEnabled?: boolean;
  /** Which node, for a cluster (`host:port`). */
  readonly node?: string;
}

/** Stable codes of the start-up warnings. */
export type StartupWarningCode =
  | 'SLUICE_EVICTION_POLICY'
  | 'SLUICE_REPLICA'
  | 'SLUICE_REDIS_VERSION'
  | 'SLUICE_CLUSTER_NODE';

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
 * The warnings the facts call for (none for a primary ≥ 7.0 with `noeviction`).
 * `clusterClient` says whether the limiter's client is a cluster client: a single-node
 * client on a cluster node decides only the slots that node serves (`MOVED` for the rest).
 */
export function warningsFor(facts: ServerFacts, clusterClient = false): StartupWarning[] {
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
