/**
 * What the cluster benchmark compares: sluice's `RateLimiter` (default options, a
 * `fixedWindow` policy) on one server and on a Redis Cluster of 3 primaries, with the
 * coalescer's batches grouped in several ways. Nothing in `src/` is changed: each grouping
 * is a `ScriptStore` wrapped around the store sluice picks for the client.
 *
 * - `single`: `connectRedis` on one server (the reference).
 * - `cluster-node`: `createCluster`, as shipped: one batch per node (`groupOf` from the
 *   client's slot map), a batch of several slots sent as the `allow-cross-slot-keys` batch
 *   script with its keys in ARGV.
 * - `cluster-slot`: a wrapper whose `groupOf` returns the key's slot: one batch per slot.
 * - `cluster-one`: a wrapper without `groupOf`: one batch for every node, as on one server
 *   (sent to the node of its first key; the requests of other nodes fail there, "non local
 *   key", and are resent alone).
 */
import calculateSlot from 'cluster-key-slot';
import { createCluster } from 'redis';
import { fixedWindow, RateLimiter } from '../../src/index.js';
import { connectRedis } from '../../src/redis/node-redis/connect.js';
import { storeFor } from '../../src/redis/select.js';
import type { ScriptStore } from '../../src/stores/store.js';
import type { BenchPolicy } from '../types.js';

/** Where a variant runs: one server's URL, or the cluster's root node URLs. */
export interface Targets {
  readonly single: string;
  readonly cluster: readonly string[];
}

/** A connected limiter under test. */
export interface VariantTaker {
  take(tenant: string): Promise<boolean>;
  close(): Promise<void>;
}

export interface Variant {
  readonly name: string;
  readonly description: string;
  /** Whether it runs on the cluster (its Redis CPU is then the sum of the 3 primaries'). */
  readonly cluster: boolean;
  /** `timeoutMs`: the limiter's deadline (default 150, sluice's). */
  setup(targets: Targets, policy: BenchPolicy, timeoutMs?: number): Promise<VariantTaker>;
}

const ROUTE = 'GET/bench';

/** `store` with its `groupOf` replaced (`undefined`: removed). */
function regrouped(
  store: ScriptStore,
  groupOf: ((key: string) => string) | undefined,
  evalScript: ScriptStore['evalScript'] = (script, keys, args) =>
    store.evalScript(script, keys, args),
): ScriptStore {
  return {
    evalScript,
    ...(groupOf === undefined ? {} : { groupOf }),
    ...(store.serverFacts === undefined ? {} : { serverFacts: () => store.serverFacts?.() }),
  } as ScriptStore;
}

/** The store sluice picks for a `createCluster` client, wrapped by `wrap`. */
function clusterVariant(
  name: string,
  description: string,
  wrap: ((store: ScriptStore) => ScriptStore) | undefined,
): Variant {
  return {
    name,
    description,
    cluster: true,
    async setup(targets, { limit, windowMs }, timeoutMs = 150) {
      const client = createCluster({
        rootNodes: targets.cluster.map((url) => ({ url })),
        defaults: { disableOfflineQueue: true },
      });
      client.on('error', () => {});
      await client.connect();
      const store = storeFor(client);
      const limiter = new RateLimiter(
        wrap === undefined
          ? { client: client as never, timeoutMs, onWarning: () => {} }
          : { store: wrap(store), timeoutMs, onWarning: () => {} },
      );
      const policy = fixedWindow({ limit, windowMs });
      return {
        take: (tenant) => limiter.take({ tenant, route: ROUTE }, policy).then((d) => d.allowed),
        close: async () => client.destroy(),
      };
    },
  };
}

export const variants: Record<string, Variant> = {
  single: {
    name: 'single',
    description: 'one redis-server, connectRedis (the reference)',
    cluster: false,
    async setup(targets, { limit, windowMs }, timeoutMs = 150) {
      const client = await connectRedis({ url: targets.single });
      const limiter = new RateLimiter({ client, timeoutMs, onWarning: () => {} });
      const policy = fixedWindow({ limit, windowMs });
      return {
        take: (tenant) => limiter.take({ tenant, route: ROUTE }, policy).then((d) => d.allowed),
        close: () => client.close(),
      };
    },
  },
  'cluster-node': clusterVariant(
    'cluster-node',
    'createCluster as shipped: one batch per node (allow-cross-slot-keys batch script, keys in ARGV)',
    undefined,
  ),
  'cluster-slot': clusterVariant(
    'cluster-slot',
    'createCluster, groupOf = the key’s slot: one batch per slot',
    (store) => regrouped(store, (key) => String(calculateSlot(key))),
  ),
  'cluster-one': clusterVariant(
    'cluster-one',
    'createCluster, no groupOf: one batch for all nodes',
    (store) => regrouped(store, undefined),
  ),
};

export const variantNames = Object.keys(variants);
