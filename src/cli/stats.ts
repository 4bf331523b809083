/**
 * `sluice stats`: live sluice keys per namespace and algorithm, found with `SCAN … COUNT`
 * (never `KEYS`, which blocks the server) within a time budget, and what decides whether
 * they survive memory pressure: memory in use, `maxmemory`, `maxmemory-policy` (every sluice
 * key has a TTL, so `volatile-*` policies evict them as surely as `allkeys-*`), the server
 * version and its role.
 */
import { fixedWindow } from '../algorithms/fixed-window.js';
import { gcra } from '../algorithms/gcra.js';
import { slidingWindowCounter } from '../algorithms/sliding-window-counter.js';
import { slidingWindowLog } from '../algorithms/sliding-window-log.js';
import { tokenBucket } from '../algorithms/token-bucket.js';
import {
  type Client,
  connect,
  count,
  disconnect,
  duration,
  EXIT,
  NAMESPACE,
  redacted,
  redisFailure,
  redisUrl,
  table,
  usage,
} from './common.js';

/** Options of `sluice stats`. */
export interface StatsOptions {
  readonly url?: string;
  /** Only this namespace (`SCAN … MATCH <namespace>:*`); all of them when absent. */
  readonly namespace?: string;
  readonly maxSeconds: number;
  readonly count: number;
  readonly json?: boolean;
}

/** Each algorithm's key tag (the part of a key before its policy digest) → its name. */
const ALGORITHMS: ReadonlyMap<string, string> = new Map(
  [
    fixedWindow({ limit: 1, windowMs: 1 }),
    slidingWindowLog({ limit: 1, windowMs: 1 }),
    slidingWindowCounter({ limit: 1, windowMs: 1 }),
    tokenBucket({ capacity: 1, refillIntervalMs: 1 }),
    gcra({ limit: 1, periodMs: 1 }),
  ].map((p) => [p.keyTag, p.algorithm]),
);

/** A key of scheme v2: `<ns>:{<tenant hash>}:<tag>.<16 hex>[:<32 hex>]`. */
const KEY = /^([A-Za-z0-9._:-]{1,64}):\{([0-9a-f]{32})\}:([a-z]+)\.[0-9a-f]{16}(:[0-9a-f]{32})?$/;
/** A namespace's reset epoch: `<ns>:reset-epoch`. */
const EPOCH = /^([A-Za-z0-9._:-]{1,64}):reset-epoch$/;

/** Counts of one namespace. */
interface NamespaceCounts {
  keys: number;
  /** Algorithm name → keys. */
  readonly algorithms: Record<string, number>;
  /** Tenant-wide keys (no route, no user). */
  tenantWide: number;
  /** Distinct tenants (hashes) seen. */
  readonly tenants: Set<string>;
  resetEpoch: boolean;
}

/** Evicting policies put quota keys at risk: every sluice key has a TTL. */
function evictionWarning(policy: string, maxmemory: number): string | undefined {
  if (policy === 'noeviction' || policy === '') return undefined;
  const when =
    maxmemory === 0 ? ' (maxmemory is 0 now, so nothing is evicted until a limit is set)' : '';
  return `maxmemory-policy is ${policy}: under memory pressure Redis evicts keys, quota keys included${
    policy.startsWith('volatile-')
      ? ' (every sluice key has a TTL, so volatile-* policies evict them too)'
      : ''
  }, and an evicted scope starts its window over early${when}. Keep quotas on a Redis with maxmemory-policy noeviction (writes then fail with OOM: 503 on fail-closed routes).`;
}

function infoFields(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) fields.set(line.slice(0, at), line.slice(at + 1));
  }
  return fields;
}

/** `sluice stats`. */
export async function stats(options: StatsOptions): Promise<number> {
  const { namespace } = options;
  if (namespace !== undefined && !NAMESPACE.test(namespace)) {
    throw usage(`--namespace must be 1–64 characters of [A-Za-z0-9._:-], not "${namespace}"`);
  }
  const url = redisUrl(options);
  const client = await connect(url);
  try {
    return await report(client, url, options);
  } catch (error) {
    redisFailure(error, url);
  } finally {
    await disconnect(client);
  }
}

async function report(client: Client, url: string, options: StatsOptions): Promise<number> {
  const send = (args: string[]): Promise<unknown> => client.client.sendCommand(args);
  const info = infoFields(
    [
      String(await send(['INFO', 'server'])),
      String(await send(['INFO', 'replication'])),
      String(await send(['INFO', 'memory'])),
    ].join('\n'),
  );
  let policy = info.get('maxmemory_policy') ?? '';
  let policyFrom = 'INFO memory';
  try {
    const reply = (await send(['CONFIG', 'GET', 'maxmemory-policy'])) as unknown;
    const value = Array.isArray(reply)
      ? reply[1]
      : (reply as Record<string, string>)?.['maxmemory-policy'];
    if (typeof value === 'string') {
      policy = value;
      policyFrom = 'CONFIG GET';
    }
  } catch {
    // CONFIG is often disabled or renamed on managed Redis: INFO memory says it too.
  }
  const maxmemory = Number(info.get('maxmemory') ?? 0);
  const dbsize = Number(await send(['DBSIZE']));

  // SCAN, bounded in time; progress on stderr once it takes more than a second.
  const started = performance.now();
  const deadline = started + options.maxSeconds * 1000;
  const match = options.namespace === undefined ? [] : ['MATCH', `${options.namespace}:*`];
  const namespaces = new Map<string, NamespaceCounts>();
  let scanned = 0;
  let other = 0;
  let cursor = '0';
  let partial = false;
  let lastProgress = started;
  const progress = (final: boolean) => {
    const line = `sluice stats: scanned ${count(scanned)} of about ${count(dbsize)} keys in ${duration(performance.now() - started)}`;
    if (process.stderr.isTTY) process.stderr.write(`\r${line}${final ? '\n' : ''}`);
    else if (!final) process.stderr.write(`${line}\n`);
  };
  do {
    const reply = (await send(['SCAN', cursor, ...match, 'COUNT', String(options.count)])) as [
      string,
      string[],
    ];
    cursor = String(reply[0]);
    for (const key of reply[1]) {
      scanned++;
      const m = KEY.exec(key);
      const algorithm = m === null ? undefined : ALGORITHMS.get(m[3] as string);
      const epoch = m === null ? EPOCH.exec(key) : null;
      const ns = (m?.[1] ?? epoch?.[1]) as string | undefined;
      if (ns === undefined || (algorithm === undefined && epoch === null)) {
        other++;
        continue;
      }
      if (options.namespace !== undefined && ns !== options.namespace) {
        other++; // e.g. "rate:x" keys when asked for "rate"
        continue;
      }
      let counts = namespaces.get(ns);
      if (counts === undefined) {
        counts = { keys: 0, algorithms: {}, tenantWide: 0, tenants: new Set(), resetEpoch: false };
        namespaces.set(ns, counts);
      }
      if (epoch !== null) {
        counts.resetEpoch = true;
        continue;
      }
      counts.keys++;
      counts.algorithms[algorithm as string] = (counts.algorithms[algorithm as string] ?? 0) + 1;
      if (m?.[4] === undefined) counts.tenantWide++;
      counts.tenants.add(m?.[2] as string);
    }
    const now = performance.now();
    if (now - lastProgress >= 1000) {
      lastProgress = now;
      progress(false);
    }
    if (cursor !== '0' && now >= deadline) partial = true;
  } while (cursor !== '0' && !partial);
  if (lastProgress !== started) progress(true);
  const elapsedMs = performance.now() - started;

  const warnings: string[] = [];
  const eviction = evictionWarning(policy, maxmemory);
  if (eviction !== undefined) warnings.push(eviction);
  if (partial) {
    warnings.push(
      `partial: the scan stopped after ${options.maxSeconds} s (--max-seconds) having read ${count(scanned)} of about ${count(dbsize)} keys; the counts are lower bounds`,
    );
  }
  const algorithms = [...ALGORITHMS.values()];
  const server = {
    version: info.get('redis_version') ?? 'unknown',
    mode: info.get('redis_mode') ?? 'unknown',
    role: info.get('role') ?? 'unknown',
    usedMemoryHuman: info.get('used_memory_human') ?? 'unknown',
    maxmemory,
    maxmemoryHuman: info.get('maxmemory_human') ?? String(maxmemory),
    maxmemoryPolicy: policy || 'unknown',
    maxmemoryPolicyFrom: policyFrom,
  };
  const sorted = [...namespaces].sort(([a], [b]) => a.localeCompare(b));
  if (options.json) {
    console.log(
      JSON.stringify(
        {
          ok: true,
          url: redacted(url),
          server,
          scan: {
            namespace: options.namespace ?? null,
            scanned,
            dbsize,
            complete: !partial,
            elapsedMs: Math.round(elapsedMs),
          },
          namespaces: Object.fromEntries(
            sorted.map(([ns, c]) => [
              ns,
              {
                keys: c.keys,
                algorithms: Object.fromEntries(algorithms.map((a) => [a, c.algorithms[a] ?? 0])),
                tenantWideKeys: c.tenantWide,
                tenants: c.tenants.size,
                resetEpoch: c.resetEpoch,
              },
            ]),
          ),
          otherKeys: other,
          warnings,
        },
        null,
        2,
      ),
    );
    return EXIT.ok;
  }
  console.log(
    `Redis ${server.version} (${server.mode}, role ${server.role}) at ${redacted(url)}: used memory ${server.usedMemoryHuman}, maxmemory ${
      maxmemory === 0 ? '0 (no limit)' : server.maxmemoryHuman
    }, maxmemory-policy ${server.maxmemoryPolicy}`,
  );
  console.log(
    `${partial ? 'partial scan' : 'scanned'}: ${count(scanned)} keys${
      options.namespace === undefined ? '' : ` matching ${options.namespace}:*`
    } of ${count(dbsize)} in ${duration(elapsedMs)}${partial ? ' (stopped at --max-seconds)' : ''}`,
  );
  console.log('');
  if (sorted.length === 0) {
    console.log('no sluice keys');
  } else {
    const rows: (string | number)[][] = [
      ['namespace', 'keys', 'tenants', ...algorithms, 'tenant-wide'],
      ...sorted.map(([ns, c]) => [
        ns,
        c.keys,
        c.tenants.size,
        ...algorithms.map((a) => c.algorithms[a] ?? 0),
        c.tenantWide,
      ]),
    ];
    for (const line of table(rows)) console.log(line);
  }
  console.log('');
  console.log(`other keys (not sluice's): ${count(other)}`);
  for (const warning of warnings) console.error(`warning: ${warning}`);
  return EXIT.ok;
}
