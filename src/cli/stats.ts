/**
 * `sluice stats`: live sluice keys per namespace and algorithm, found with `SCAN … COUNT`
 * (never `KEYS`, which blocks the server) within a time budget, and what decides whether
 * they survive memory pressure: memory in use, `maxmemory`, `maxmemory-policy` (every sluice
 * key has a TTL, so `volatile-*` policies evict them as surely as `allkeys-*`), the server
 * version and its role.
 */
import { concurrency, MIN_LEASE_MS } from '../algorithms/concurrency.js';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { gcra } from '../algorithms/gcra.js';
import { slidingWindowCounter } from '../algorithms/sliding-window-counter.js';
import { slidingWindowLog } from '../algorithms/sliding-window-log.js';
import { tokenBucket } from '../algorithms/token-bucket.js';
import {
  badNamespace,
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
} from './common.js';
import { escapeControls, print, printError, printJson } from './output.js';

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
    concurrency({ limit: 1, leaseMs: MIN_LEASE_MS }), // its keys are lease sets
  ].map((p) => [p.keyTag, p.algorithm]),
);

/**
 * A scope's block, beside its key: `<key>:b` (see `algorithms/block.lua`); and the records
 * of retry-safe operations (`…:id:<32 hex>`: takes, takeAlls, refunds and charges with an
 * id) and of reservations (`…:rsv:<32 hex>`), in the tenant's slot.
 */
const BLOCK_SUFFIX = ':b';
const RECORD = /^([A-Za-z0-9._:-]{1,64}):\{([0-9a-f]{32})\}:(id|rsv):[0-9a-f]{32}$/;

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
  /** Blocks of scopes (`<key>:b`): scopes blocked now, or within an escalation period. */
  blocks: number;
  /** Records of retry-safe operations (`…:id:…`). */
  idRecords: number;
  /** Records of reservations (`…:rsv:…`). */
  reservations: number;
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
    throw badNamespace(namespace);
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

/** Gathers the server's facts and the scan's counts, then prints them. */
async function report(client: Client, url: string, options: StatsOptions): Promise<number> {
  const send = (args: string[]): Promise<unknown> => client.client.sendCommand(args);
  const server = await serverFacts(send);
  const scan = await scanKeys(send, options, server.dbsize);
  const warnings = warningsOf(server, scan, options);
  if (options.json) printStatsJson(url, server, scan, warnings, options);
  else printStatsText(url, server, scan, warnings, options);
  return EXIT.ok;
}

type Send = (args: string[]) => Promise<unknown>;

/** What the server says of itself: version, role, memory, eviction policy, key count. */
interface ServerFacts {
  readonly version: string;
  readonly mode: string;
  readonly role: string;
  readonly usedMemoryHuman: string;
  readonly maxmemory: number;
  readonly maxmemoryHuman: string;
  /** As the server has it, `''` when it says nothing. */
  readonly policy: string;
  readonly policyFrom: string;
  readonly dbsize: number;
}

async function serverFacts(send: Send): Promise<ServerFacts> {
  const info = infoFields(
    [
      String(await send(['INFO', 'server'])),
      String(await send(['INFO', 'replication'])),
      String(await send(['INFO', 'memory'])),
    ].join('\n'),
  );
  const configured = await configuredPolicy(send);
  const maxmemory = Number(info.get('maxmemory') ?? 0);
  const dbsize = Number(await send(['DBSIZE']));
  return {
    version: info.get('redis_version') ?? 'unknown',
    mode: info.get('redis_mode') ?? 'unknown',
    role: info.get('role') ?? 'unknown',
    usedMemoryHuman: info.get('used_memory_human') ?? 'unknown',
    maxmemory,
    maxmemoryHuman: info.get('maxmemory_human') ?? String(maxmemory),
    policy: configured ?? info.get('maxmemory_policy') ?? '',
    policyFrom: configured === undefined ? 'INFO memory' : 'CONFIG GET',
    dbsize,
  };
}

/** `maxmemory-policy` from `CONFIG GET`, or undefined when the server does not answer it. */
async function configuredPolicy(send: Send): Promise<string | undefined> {
  try {
    const reply = (await send(['CONFIG', 'GET', 'maxmemory-policy'])) as unknown;
    const value = Array.isArray(reply)
      ? reply[1]
      : (reply as Record<string, string>)?.['maxmemory-policy'];
    return typeof value === 'string' ? value : undefined;
  } catch {
    // CONFIG is often disabled or renamed on managed Redis: INFO memory says it too.
    return undefined;
  }
}

/**
 * The keys the scan read that no namespace's counts hold, by kind; with the namespaces'
 * keys and reset epochs they add up to the keys scanned.
 */
interface OtherKeys {
  /** Keys of sluice's shape whose algorithm tag this version does not know (an older or newer version's). */
  unknownKind: number;
  /** Sluice keys of another namespace that `MATCH <namespace>:*` also matches (`rate:x` under `rate`). */
  otherNamespace: number;
  /** Keys that are not sluice's. */
  notSluice: number;
}

/** What the scan found. */
interface ScanCounts {
  /** Namespace → its counts, in the order first seen. */
  readonly namespaces: Map<string, NamespaceCounts>;
  scanned: number;
  /** Keys that no namespace's counts hold, by kind. */
  readonly other: OtherKeys;
  /** The scan stopped at `--max-seconds` before its end. */
  partial: boolean;
  elapsedMs: number;
}

/**
 * SCANs the keys (of `--namespace` only, when given) until the cursor comes back or
 * `--max-seconds` have passed; progress on stderr once it takes more than a second.
 */
async function scanKeys(send: Send, options: StatsOptions, dbsize: number): Promise<ScanCounts> {
  const started = performance.now();
  const deadline = started + options.maxSeconds * 1000;
  const match = options.namespace === undefined ? [] : ['MATCH', `${options.namespace}:*`];
  const counts: ScanCounts = {
    namespaces: new Map(),
    scanned: 0,
    other: { unknownKind: 0, otherNamespace: 0, notSluice: 0 },
    partial: false,
    elapsedMs: 0,
  };
  let cursor = '0';
  let lastProgress = started;
  const progress = (final: boolean) =>
    showProgress(counts.scanned, dbsize, performance.now() - started, final);
  do {
    const reply = (await send(['SCAN', cursor, ...match, 'COUNT', String(options.count)])) as [
      string,
      string[],
    ];
    cursor = String(reply[0]);
    for (const key of reply[1]) countKey(counts, key, options.namespace);
    const now = performance.now();
    if (now - lastProgress >= 1000) {
      lastProgress = now;
      progress(false);
    }
    if (cursor !== '0' && now >= deadline) counts.partial = true;
  } while (cursor !== '0' && !counts.partial);
  if (lastProgress !== started) progress(true);
  counts.elapsedMs = performance.now() - started;
  return counts;
}

/** One progress line on stderr: rewritten in place on a terminal, else one line each time. */
function showProgress(scanned: number, dbsize: number, elapsedMs: number, final: boolean): void {
  const line = escapeControls(
    `sluice stats: scanned ${count(scanned)} of about ${count(dbsize)} keys in ${duration(elapsedMs)}`,
  );
  if (process.stderr.isTTY) process.stderr.write(`\r${line}${final ? '\n' : ''}`);
  else if (!final) process.stderr.write(`${line}\n`);
}

/**
 * Counts one scanned key: a sluice key or reset epoch of its namespace, else one of the
 * other kinds.
 */
function countKey(counts: ScanCounts, key: string, only: string | undefined): void {
  counts.scanned++;
  const block = key.endsWith(BLOCK_SUFFIX);
  const m = KEY.exec(block ? key.slice(0, -BLOCK_SUFFIX.length) : key);
  const algorithm = m === null ? undefined : ALGORITHMS.get(m[3] as string);
  const record = m === null ? RECORD.exec(key) : null;
  const epoch = m === null && record === null ? EPOCH.exec(key) : null;
  const ns = (m?.[1] ?? record?.[1] ?? epoch?.[1]) as string | undefined;
  if (ns === undefined) {
    counts.other.notSluice++;
    return;
  }
  if (only !== undefined && ns !== only) {
    counts.other.otherNamespace++; // e.g. "rate:x" keys when asked for "rate"
    return;
  }
  if (algorithm === undefined && epoch === null && record === null) {
    counts.other.unknownKind++;
    return;
  }
  let of = counts.namespaces.get(ns);
  if (of === undefined) {
    of = {
      keys: 0,
      algorithms: {},
      tenantWide: 0,
      tenants: new Set(),
      resetEpoch: false,
      blocks: 0,
      idRecords: 0,
      reservations: 0,
    };
    counts.namespaces.set(ns, of);
  }
  if (epoch !== null) {
    of.resetEpoch = true;
    return;
  }
  if (record !== null) {
    if (record[3] === 'id') of.idRecords++;
    else of.reservations++;
    return;
  }
  if (block) {
    of.blocks++;
    return;
  }
  of.keys++;
  of.algorithms[algorithm as string] = (of.algorithms[algorithm as string] ?? 0) + 1;
  if (m?.[4] === undefined) of.tenantWide++;
  of.tenants.add(m?.[2] as string);
}

/** An evicting `maxmemory-policy`, and a scan cut short. */
function warningsOf(server: ServerFacts, scan: ScanCounts, options: StatsOptions): string[] {
  const warnings: string[] = [];
  const eviction = evictionWarning(server.policy, server.maxmemory);
  if (eviction !== undefined) warnings.push(eviction);
  if (scan.partial) {
    warnings.push(
      `partial: the scan stopped after ${options.maxSeconds} s (--max-seconds) having read ${count(scan.scanned)} of about ${count(server.dbsize)} keys; the counts are lower bounds`,
    );
  }
  return warnings;
}

const algorithmNames = () => [...ALGORITHMS.values()];

/** The namespaces found, by name. */
const byName = (scan: ScanCounts) => [...scan.namespaces].sort(([a], [b]) => a.localeCompare(b));

/** Keys that no namespace's counts hold. */
const otherCount = (o: OtherKeys) => o.unknownKind + o.otherNamespace + o.notSluice;

/**
 * Each kind of key the scan read, with how many: they add up to the keys scanned (the
 * namespaces' keys, their reset epochs, then the others).
 */
function kindsOfKeys(scan: ScanCounts, options: StatsOptions): [string, number][] {
  const namespaces = [...scan.namespaces.values()];
  const kinds: [string, number][] = [
    ['sluice keys (the table above)', namespaces.reduce((n, c) => n + c.keys, 0)],
    ['reset epochs (<namespace>:reset-epoch)', namespaces.filter((c) => c.resetEpoch).length],
    ['blocks of scopes (<key>:b)', namespaces.reduce((n, c) => n + c.blocks, 0)],
    ['records of retry-safe operations (…:id:…)', namespaces.reduce((n, c) => n + c.idRecords, 0)],
    ['records of reservations (…:rsv:…)', namespaces.reduce((n, c) => n + c.reservations, 0)],
    ['sluice keys of an algorithm tag unknown here (another version’s)', scan.other.unknownKind],
  ];
  if (options.namespace !== undefined) {
    kinds.push([
      `sluice keys of other namespaces under ${options.namespace}:*`,
      scan.other.otherNamespace,
    ]);
  }
  kinds.push(['other keys (not sluice’s)', scan.other.notSluice]);
  return kinds;
}

function printStatsJson(
  url: string,
  server: ServerFacts,
  scan: ScanCounts,
  warnings: readonly string[],
  options: StatsOptions,
): void {
  const algorithms = algorithmNames();
  printJson(
    {
      ok: true,
      url: redacted(url),
      server: {
        version: server.version,
        mode: server.mode,
        role: server.role,
        usedMemoryHuman: server.usedMemoryHuman,
        maxmemory: server.maxmemory,
        maxmemoryHuman: server.maxmemoryHuman,
        maxmemoryPolicy: server.policy || 'unknown',
        maxmemoryPolicyFrom: server.policyFrom,
      },
      scan: {
        namespace: options.namespace ?? null,
        scanned: scan.scanned,
        dbsize: server.dbsize,
        complete: !scan.partial,
        elapsedMs: Math.round(scan.elapsedMs),
      },
      namespaces: Object.fromEntries(
        byName(scan).map(([ns, c]) => [
          ns,
          {
            keys: c.keys,
            algorithms: Object.fromEntries(algorithms.map((a) => [a, c.algorithms[a] ?? 0])),
            tenantWideKeys: c.tenantWide,
            tenants: c.tenants.size,
            resetEpoch: c.resetEpoch,
            blocks: c.blocks,
            idRecords: c.idRecords,
            reservations: c.reservations,
          },
        ]),
      ),
      otherKeys: otherCount(scan.other),
      otherKeysByKind: { ...scan.other },
      warnings,
    },
    null,
    2,
  );
}

function printStatsText(
  url: string,
  server: ServerFacts,
  scan: ScanCounts,
  warnings: readonly string[],
  options: StatsOptions,
): void {
  const { partial } = scan;
  print(
    `Redis ${server.version} (${server.mode}, role ${server.role}) at ${redacted(url)}: used memory ${server.usedMemoryHuman}, maxmemory ${
      server.maxmemory === 0 ? '0 (no limit)' : server.maxmemoryHuman
    }, maxmemory-policy ${server.policy || 'unknown'}`,
  );
  print(
    `${partial ? 'partial scan' : 'scanned'}: ${count(scan.scanned)} keys${
      options.namespace === undefined ? '' : ` matching ${options.namespace}:*`
    } of ${count(server.dbsize)} in ${duration(scan.elapsedMs)}${partial ? ' (stopped at --max-seconds)' : ''}`,
  );
  print('');
  const sorted = byName(scan);
  if (sorted.length === 0) {
    print('no sluice keys');
  } else {
    const algorithms = algorithmNames();
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
    for (const line of table(rows)) print(line);
  }
  print('');
  print(`the ${count(scan.scanned)} keys scanned, by kind:`);
  for (const line of table(kindsOfKeys(scan, options))) print(`  ${line}`);
  for (const warning of warnings) printError(`warning: ${warning}`);
}
