/**
 * Test fixtures: real multi-node Redis topologies on loopback, started from scratch for one
 * test file (or one bench run) and stopped by pid.
 *
 * - {@link startRedisCluster}: a Redis Cluster of 3 primaries and 3 replicas
 *   (`redis-cli --cluster create … --cluster-replicas 1`), ready once every node says
 *   `cluster_state:ok`, every node's slot map covers the 16384 slots and every replica's link
 *   is up.
 * - {@link startSentinel}: a primary, its replica and three sentinels monitoring it as
 *   `mymaster` (quorum 2, down after 1000 ms, failover timeout 3000 ms), ready once every
 *   sentinel knows the replica and the two other sentinels.
 *
 * Every process runs in a fresh temporary directory (cluster config files, sentinel config
 * files, nothing else: no RDB, no AOF). `stop()` SIGKILLs exactly the pids it started and
 * removes that directory; `useRedisCluster()` / `useSentinel()` register it with node:test's
 * `after`, so it runs when a test fails too, and a process exit kills what is left. Ports are
 * chosen in 21000–22767: a cluster node's bus port is its port + 10000, so both stay below
 * the kernel's ephemeral range (32768+), where `freePort()` of other fixtures draws from, and
 * both are checked free before use. Nothing else is touched: not the Redis on 6379, not any
 * process this module did not start.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

const HOST = '127.0.0.1';
/** Ports are drawn from [PORT_MIN, PORT_MAX]; +10000 (a cluster bus) stays below 32768. */
const PORT_MIN = 21_000;
const PORT_MAX = 22_767;
const BUS_OFFSET = 10_000;
const READY_TIMEOUT_MS = 30_000;

/** One redis-server (or sentinel) process started here. */
export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  /** The pid, or -1 once it was killed. */
  readonly pid: number;
}

/** A node of the cluster as created: its role then (a failover may change it). */
export interface ClusterNode extends RedisProcess {
  /** The node id (CLUSTER MYID). */
  readonly id: string;
  readonly role: 'primary' | 'replica';
  /** For a replica: the port of its primary at creation. */
  readonly primaryPort?: number;
}

export interface RedisCluster {
  /** For node-redis `createCluster({ rootNodes })`. */
  readonly rootNodes: readonly { readonly url: string }[];
  /** The six nodes, primaries first. */
  readonly nodes: readonly ClusterNode[];
  readonly primaries: readonly ClusterNode[];
  readonly replicas: readonly ClusterNode[];
  /** Runs one command on the node at `port` (redis-cli), resolves with its raw output. */
  command(port: number, ...args: string[]): Promise<string>;
  /** The port of the primary serving `slot` now, per CLUSTER SLOTS of the first node that answers. */
  primaryOf(slot: number): Promise<number>;
  /** {@link primaryOf} of each of `slots`, from one CLUSTER SLOTS (one redis-cli, not one each). */
  primariesOf(slots: readonly number[]): Promise<number[]>;
  /**
   * Resolves once every node that runs names the same primaries, each holding slots, and
   * agrees on who serves every slot (after a failover or a slot move, gossip takes a moment).
   */
  settled(): Promise<void>;
  /** The shards now (a failover swaps roles), per CLUSTER NODES of the first node that answers. */
  shards(): Promise<{ readonly primary: number; readonly replicas: readonly number[] }[]>;
  /** The node at `port` (started here), as created. */
  node(port: number): ClusterNode;
  /** SIGKILLs the node at `port` (started here) and waits for its exit. */
  kill(port: number): Promise<void>;
  /** SIGKILLs every process started here and removes the temporary directory. */
  stop(): Promise<void>;
}

export interface RedisSentinel {
  /** The name the sentinels monitor: `mymaster`. */
  readonly name: string;
  /** For node-redis `createSentinel({ sentinelRootNodes })`. */
  readonly sentinelRootNodes: readonly { readonly host: string; readonly port: number }[];
  /** The primary and the replica at start. */
  readonly primary: RedisProcess;
  readonly replica: RedisProcess;
  readonly sentinels: readonly RedisProcess[];
  /** Runs one command on the process at `port` (redis-cli), resolves with its raw output. */
  command(port: number, ...args: string[]): Promise<string>;
  /** The port the sentinels now name as the primary (asks the first sentinel that answers). */
  primaryPort(): Promise<number>;
  /** SIGKILLs the process at `port` (started here) and waits for its exit. */
  kill(port: number): Promise<void>;
  /** SIGKILLs every process started here and removes the temporary directory. */
  stop(): Promise<void>;
}

/** A fixture whose value exists inside tests (after `before`). */
export interface Fixture<T> {
  readonly value: T;
}

/** Starts a cluster before the file's tests and stops it after them, even on failure. */
export function useRedisCluster(): Fixture<RedisCluster> {
  return useTopology(startRedisCluster);
}

/** Starts a Sentinel setup before the file's tests and stops it after them, even on failure. */
export function useSentinel(): Fixture<RedisSentinel> {
  return useTopology(startSentinel);
}

function useTopology<T extends { stop(): Promise<void> }>(start: () => Promise<T>): Fixture<T> {
  let value: T | undefined;
  before(async () => {
    value = await start();
  });
  after(async () => {
    await value?.stop();
  });
  return {
    get value() {
      if (value === undefined) throw new Error('topology fixture used outside a test');
      return value;
    },
  };
}

/** Signals whose default action ends the process. */
const ENDING_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

/** The processes of one topology: started, killed and cleaned up together. */
class Processes {
  readonly dir = mkdtempSync(join(tmpdir(), 'sluice-topology-'));
  readonly #children = new Map<number, ChildProcess>();
  readonly #onExit = () => this.#killAll();
  /**
   * A signal that ends the test process (the test runner's SIGTERM when a file outlives its
   * timeout, a Ctrl-C) runs no `after` hook and no `exit` listener: the processes are killed
   * here, then the signal is raised again for its usual effect (or the next topology's).
   */
  readonly #onSignal = (signal: NodeJS.Signals) => {
    this.#forgetProcess();
    this.#killAll();
    process.kill(process.pid, signal);
  };
  #stopped = false;

  constructor() {
    // A test process that dies without running `after` still leaves nothing behind.
    process.once('exit', this.#onExit);
    for (const signal of ENDING_SIGNALS) process.once(signal, this.#onSignal);
  }

  #forgetProcess(): void {
    process.off('exit', this.#onExit);
    for (const signal of ENDING_SIGNALS) process.off(signal, this.#onSignal);
  }

  /** Starts `redis-server args…` and resolves once it answers PING on `port`. */
  async start(port: number, args: string[]): Promise<RedisProcess> {
    if (this.#stopped) throw new Error('topology already stopped');
    const child = spawn('redis-server', args, { cwd: this.dir, stdio: 'ignore' });
    child.unref();
    this.#children.set(port, child);
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (child.exitCode !== null) {
        throw new Error(`redis-server on ${port} exited with code ${child.exitCode}`);
      }
      if ((await cli(port, 'PING').catch(() => '')) === 'PONG') break;
      if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not answer PING`);
      await sleep(20);
    }
    return this.process(port);
  }

  /** The process on `port`, as a {@link RedisProcess}. */
  process(port: number): RedisProcess {
    const pidOf = (p: number) => this.pidOf(p);
    return {
      port,
      url: `redis://${HOST}:${port}`,
      get pid() {
        return pidOf(port);
      },
    };
  }

  /** The pid of the process on `port`, or -1 once it exited. */
  pidOf(port: number): number {
    const child = this.#children.get(port);
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return -1;
    return child.pid ?? -1;
  }

  async kill(port: number): Promise<void> {
    const child = this.#children.get(port);
    if (child === undefined) throw new Error(`no process of this topology on port ${port}`);
    await killChild(child);
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#forgetProcess();
    await Promise.all([...this.#children.values()].map(killChild));
    rmSync(this.dir, { recursive: true, force: true });
  }

  /**
   * Synchronous, for `exit` and the signals: SIGKILL each pid started here that still runs,
   * then removes the directory. Never throws: a throw in a signal listener would keep the
   * process alive (the test runner's harness catches it), and the suite waiting on it. The
   * directory may well fail to go (a server killed an instant ago can still be writing to it).
   */
  #killAll(): void {
    for (const child of this.#children.values()) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    try {
      rmSync(this.dir, { recursive: true, force: true });
    } catch {}
  }
}

function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.ref(); // keep the event loop alive until the exit is seen
  child.kill('SIGKILL');
  return exited;
}

/** Runs `redis-cli -h 127.0.0.1 -p port args…`; rejects on an error reply or exit code. */
function cli(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'redis-cli',
      ['-h', HOST, '-p', String(port), ...args],
      { timeout: 5000 },
      (error, stdout, stderr) => {
        const out = stdout.trim();
        if (error !== null) reject(new Error(`redis-cli -p ${port} ${args.join(' ')}: ${stderr}`));
        else if (/^(ERR|WRONGTYPE|NOSCRIPT|MOVED|ASK|CLUSTERDOWN|Could not connect)/.test(out)) {
          reject(new Error(`redis-cli -p ${port} ${args.join(' ')}: ${out}`));
        } else resolve(out);
      },
    );
  });
}

/** Polls `check` until it returns true; rejects naming `what` after `ms`. */
async function waitFor(what: string, check: () => Promise<boolean>, ms = READY_TIMEOUT_MS) {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`not ready within ${ms} ms: ${what}${last ? ` (${String(last)})` : ''}`);
    }
    await sleep(50);
  }
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** Ports chosen by this process, so two topologies of one process never pick the same. */
const taken = new Set<number>();

/** `count` ports in [PORT_MIN, PORT_MAX], each free, and (`bus`) each port + 10000 free. */
async function freePorts(count: number, bus: boolean): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count; attempt++) {
    if (attempt > 2000) throw new Error('no free loopback ports in 21000–22767');
    const port = PORT_MIN + Math.floor(Math.random() * (PORT_MAX - PORT_MIN + 1));
    if (taken.has(port) || (bus && taken.has(port + BUS_OFFSET))) continue;
    if (!(await isFree(port)) || (bus && !(await isFree(port + BUS_OFFSET)))) continue;
    taken.add(port);
    if (bus) taken.add(port + BUS_OFFSET);
    ports.push(port);
  }
  return ports;
}

function baseArgs(port: number): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    // A replica's first sync at once, not after the default 5 s wait for more replicas.
    '--repl-diskless-sync-delay',
    '0',
    // Replicas count in CLUSTER SLOTS once their replication offset is non-zero, which an
    // idle primary advances only by its replication ping (default every 10 s).
    '--repl-ping-replica-period',
    '1',
  ];
}

/** One line of CLUSTER NODES. */
interface NodeLine {
  readonly id: string;
  readonly port: number;
  readonly flags: readonly string[];
  readonly primaryId: string | undefined;
}

function parseClusterNodes(text: string): NodeLine[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id = '', address = '', flags = '', primary = '-'] = line.split(' ');
      return {
        id,
        port: Number(/:(\d+)/.exec(address)?.[1]),
        flags: flags.split(','),
        primaryId: primary === '-' ? undefined : primary,
      };
    });
}

/** The number of slots CLUSTER SLOTS (redis-cli's flat rendering) covers, with a replica each. */
async function slotsCovered(port: number): Promise<{ slots: number; withReplica: boolean }> {
  // CLUSTER SHARDS would be tidier; CLUSTER SLOTS is what clients read, so check that.
  const out = await cli(port, '--json', 'CLUSTER', 'SLOTS');
  const ranges = JSON.parse(out) as [number, number, ...unknown[]][];
  let slots = 0;
  let withReplica = true;
  for (const [start, end, ...nodes] of ranges) {
    slots += end - start + 1;
    if (nodes.length < 2) withReplica = false;
  }
  return { slots, withReplica };
}

/**
 * Starts a Redis Cluster of 3 primaries and 3 replicas on loopback (cluster-node-timeout
 * 1000 ms) and resolves once it is ready. Call `stop()` when done. `replicas: 0`: the 3
 * primaries alone (the cluster benchmark, against one server that has no replica either).
 */
export function startRedisCluster(options: { replicas?: 0 | 1 } = {}): Promise<RedisCluster> {
  const replicas = options.replicas ?? 1;
  return twice(() => startClusterOnce(replicas));
}

/**
 * `start()`, and once more on failure: a port checked free can still be taken by someone
 * else before redis-server binds it (the first attempt cleans up after itself).
 */
async function twice<T>(start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch {
    return start();
  }
}

async function startClusterOnce(replicaCount: 0 | 1): Promise<RedisCluster> {
  const processes = new Processes();
  try {
    const size = 3 * (1 + replicaCount);
    const ports = await freePorts(size, true);
    await Promise.all(
      ports.map((port) =>
        processes.start(port, [
          ...baseArgs(port),
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(processes.dir, `nodes-${port}.conf`),
          '--cluster-node-timeout',
          '1000',
          '--dir',
          processes.dir,
        ]),
      ),
    );
    await new Promise<void>((resolve, reject) => {
      execFile(
        'redis-cli',
        [
          '--cluster',
          'create',
          ...ports.map((port) => `${HOST}:${port}`),
          '--cluster-replicas',
          String(replicaCount),
          '--cluster-yes',
        ],
        { timeout: READY_TIMEOUT_MS },
        (error, stdout, stderr) => {
          if (error === null && stdout.includes('All 16384 slots covered')) resolve();
          else reject(new Error(`redis-cli --cluster create failed: ${stdout}${stderr}`));
        },
      );
    });
    for (const port of ports) {
      await waitFor(`cluster_state:ok and ${size} known nodes on ${port}`, async () => {
        const info = await cli(port, 'CLUSTER', 'INFO');
        return (
          info.includes('cluster_state:ok') &&
          info.includes('cluster_slots_assigned:16384') &&
          info.includes(`cluster_known_nodes:${size}`)
        );
      });
      await waitFor(`a complete slot map with replicas on ${port}`, async () => {
        const { slots, withReplica } = await slotsCovered(port);
        return slots === 16384 && (withReplica || replicaCount === 0);
      });
    }
    const lines = parseClusterNodes(await cli(ports[0] as number, 'CLUSTER', 'NODES'));
    const byId = new Map(lines.map((line) => [line.id, line]));
    const nodes: ClusterNode[] = lines
      .map((line): ClusterNode => {
        const primary = line.flags.includes('master');
        const primaryPort =
          line.primaryId === undefined ? undefined : byId.get(line.primaryId)?.port;
        return Object.assign(processes.process(line.port), {
          id: line.id,
          role: primary ? ('primary' as const) : ('replica' as const),
          ...(primaryPort === undefined ? {} : { primaryPort }),
        });
      })
      .sort((a, b) => (a.role === b.role ? a.port - b.port : a.role === 'primary' ? -1 : 1));
    const primaries = nodes.filter((node) => node.role === 'primary');
    const replicas = nodes.filter((node) => node.role === 'replica');
    if (primaries.length !== 3 || replicas.length !== 3 * replicaCount) {
      throw new Error(
        `expected 3 primaries and ${3 * replicaCount} replicas, got ${JSON.stringify(lines)}`,
      );
    }
    for (const replica of replicas) {
      await waitFor(`replica ${replica.port} linked to its primary`, async () =>
        (await cli(replica.port, 'INFO', 'replication')).includes('master_link_status:up'),
      );
    }
    const primariesOf = async (slots: readonly number[]): Promise<number[]> => {
      let last: unknown;
      for (const node of nodes) {
        try {
          const out = await cli(node.port, '--json', 'CLUSTER', 'SLOTS');
          const ranges = JSON.parse(out) as [number, number, [string, number, ...unknown[]]][];
          const owners = slots.map(
            (slot) => ranges.find(([start, end]) => start <= slot && slot <= end)?.[2][1],
          );
          if (owners.every((port) => port !== undefined)) return owners as number[];
          last = new Error(`slots without a primary in the map of node ${node.port}`);
        } catch (error) {
          last = error;
        }
      }
      throw new Error(`no node names a primary for every slot asked: ${String(last)}`);
    };
    return {
      rootNodes: primaries.map((node) => ({ url: node.url })),
      nodes,
      primaries,
      replicas,
      command: cli,
      primaryOf: async (slot: number) => (await primariesOf([slot]))[0] as number,
      primariesOf,
      async settled() {
        await waitFor('every node agrees on the primaries and the slots', async () => {
          const running = nodes.filter((node) => node.pid !== -1);
          const views = await Promise.all(
            running.map(async (node) => {
              const lines = parseClusterNodes(await cli(node.port, 'CLUSTER', 'NODES'));
              const primaries = lines
                .filter((line) => line.flags.includes('master') && !line.flags.includes('fail'))
                .map((line) => line.port)
                .sort((a, b) => a - b);
              const slots = await cli(node.port, '--json', 'CLUSTER', 'SLOTS');
              const ranges = (JSON.parse(slots) as [number, number, [string, number]][])
                .map(([start, end, primary]) => `${start}-${end}@${primary[1]}`)
                .sort();
              return `${primaries.join(',')} ${ranges.join(',')}`;
            }),
          );
          return views.every((view) => view === views[0]);
        });
      },
      async shards() {
        let last: unknown;
        for (const node of nodes) {
          try {
            const lines = parseClusterNodes(await cli(node.port, 'CLUSTER', 'NODES'));
            return lines
              .filter((line) => line.flags.includes('master') && !line.flags.includes('fail'))
              .map((primary) => ({
                primary: primary.port,
                replicas: lines
                  .filter((line) => line.primaryId === primary.id && !line.flags.includes('fail'))
                  .map((line) => line.port),
              }));
          } catch (error) {
            last = error;
          }
        }
        throw new Error(`no node answers CLUSTER NODES: ${String(last)}`);
      },
      node(port) {
        const node = nodes.find((n) => n.port === port);
        if (node === undefined) throw new Error(`no node of this cluster on port ${port}`);
        return node;
      },
      kill: (port) => processes.kill(port),
      stop: () => processes.stop(),
    };
  } catch (error) {
    await processes.stop();
    throw error;
  }
}

/**
 * Starts a primary, its replica and three sentinels monitoring it as `mymaster` (quorum 2,
 * down-after 1000 ms, failover-timeout 3000 ms) and resolves once every sentinel knows the
 * replica and the two other sentinels. Call `stop()` when done.
 */
export function startSentinel(): Promise<RedisSentinel> {
  return twice(startSentinelOnce);
}

async function startSentinelOnce(): Promise<RedisSentinel> {
  const name = 'mymaster';
  const processes = new Processes();
  try {
    const [primaryPort, replicaPort, ...sentinelPorts] = (await freePorts(5, false)) as [
      number,
      number,
      ...number[],
    ];
    const dirArgs = ['--dir', processes.dir];
    const primary = await processes.start(primaryPort, [...baseArgs(primaryPort), ...dirArgs]);
    const replica = await processes.start(replicaPort, [
      ...baseArgs(replicaPort),
      ...dirArgs,
      '--replicaof',
      HOST,
      String(primaryPort),
    ]);
    await waitFor('the replica linked to the primary', async () =>
      (await cli(replicaPort, 'INFO', 'replication')).includes('master_link_status:up'),
    );
    const sentinels = await Promise.all(
      sentinelPorts.map((port) => {
        // Sentinel rewrites its config file (what it learns): one writable file each.
        const file = join(processes.dir, `sentinel-${port}.conf`);
        writeFileSync(
          file,
          [
            `port ${port}`,
            `bind ${HOST}`,
            `dir ${processes.dir}`,
            `sentinel monitor ${name} ${HOST} ${primaryPort} 2`,
            `sentinel down-after-milliseconds ${name} 1000`,
            `sentinel failover-timeout ${name} 3000`,
            '',
          ].join('\n'),
        );
        return processes.start(port, [file, '--sentinel']);
      }),
    );
    for (const sentinel of sentinels) {
      await waitFor(`sentinel ${sentinel.port} knows the replica and 2 sentinels`, async () => {
        const replicas = await cli(sentinel.port, 'SENTINEL', 'REPLICAS', name);
        const others = await cli(sentinel.port, 'SENTINEL', 'SENTINELS', name);
        return (
          replicas.includes(String(replicaPort)) &&
          (others.match(/^name$/gm) ?? []).length === sentinels.length - 1
        );
      });
    }
    return {
      name,
      sentinelRootNodes: sentinels.map((s) => ({ host: HOST, port: s.port })),
      primary,
      replica,
      sentinels,
      command: cli,
      async primaryPort() {
        let last: unknown;
        for (const sentinel of sentinels) {
          try {
            const out = await cli(sentinel.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name);
            return Number(out.split('\n')[1]);
          } catch (error) {
            last = error;
          }
        }
        throw last;
      },
      kill: (port) => processes.kill(port),
      stop: () => processes.stop(),
    };
  } catch (error) {
    await processes.stop();
    throw error;
  }
}

/** What one call of a load resolves to: a decision (`allowed`) or nothing (a peek). */
export type LoadCall = () => Promise<{ readonly allowed: boolean }>;

/** Tallies of a closed-loop load, live while it runs. */
export interface Load {
  /** Admitted takes per label. */
  readonly admitted: Map<string, number>;
  /** Decisions (admitted or denied) per label. */
  readonly decided: Map<string, number>;
  /** Failures by sluice error code (`SLUICE_TIMEOUT`, …), or `other: <name>: <message>`. */
  readonly errors: Map<string, number>;
  /** The first message seen for each code of {@link errors}. */
  readonly messages: Map<string, string>;
  /** Every settlement, in order. */
  readonly events: readonly LoadEvent[];
  readonly labels: readonly string[];
  /** Stops issuing calls and waits for those in flight. */
  stop(): Promise<void>;
}

export interface LoadEvent {
  /** When the call was issued and when it settled (performance.now). */
  readonly issuedAt: number;
  readonly at: number;
  readonly label: string;
  /** `admitted`, `denied`, or the error's code. */
  readonly outcome: string;
  /** The error's message, for a failure. */
  readonly message?: string;
}

/**
 * Runs `workers` closed loops, each awaiting its call before issuing the next; worker `w`'s
 * `n`-th call is `next(w, n)` = [label, call]. After a failure a worker waits 5 ms, so a
 * client that fails at once never spins the event loop.
 */
export function startLoad(
  workers: number,
  next: (worker: number, n: number) => readonly [string, LoadCall],
): Load {
  const admitted = new Map<string, number>();
  const decided = new Map<string, number>();
  const errors = new Map<string, number>();
  const messages = new Map<string, string>();
  const events: LoadEvent[] = [];
  const labels = new Set<string>();
  const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  let running = true;
  const worker = async (w: number) => {
    for (let n = 0; running; n++) {
      const [label, call] = next(w, n);
      labels.add(label);
      const issuedAt = performance.now();
      try {
        const { allowed } = await call();
        bump(decided, label);
        if (allowed) bump(admitted, label);
        const outcome = allowed ? 'admitted' : 'denied';
        events.push({ issuedAt, at: performance.now(), label, outcome });
      } catch (error) {
        const code =
          typeof (error as { code?: unknown }).code === 'string' &&
          String((error as { code: string }).code).startsWith('SLUICE_')
            ? (error as { code: string }).code
            : `other: ${(error as Error).name}: ${(error as Error).message}`;
        bump(errors, code);
        const message = String((error as Error).message);
        if (!messages.has(code)) messages.set(code, message);
        events.push({ issuedAt, at: performance.now(), label, outcome: code, message });
        await sleep(5);
      }
    }
  };
  const done = Promise.all(Array.from({ length: workers }, (_, w) => worker(w)));
  return {
    admitted,
    decided,
    errors,
    messages,
    events,
    get labels() {
      return [...labels];
    },
    async stop() {
      running = false;
      await done;
    },
  };
}
