/**
 * `MemoryStore`: the same algorithms in process — each script's in-memory twin (see
 * `algorithms/twin.ts`) on a Map with Redis's expiry semantics — behind the same
 * `ScriptStore` interface, so the whole decision path (validation, coalescing, deadlines,
 * the denial cache) is the one that runs on Redis.
 *
 * For a single process and for tests (the fail-open fallback of a route is `LocalWindow`). It is
 * per process: N processes with a MemoryStore each admit N × the limit.
 */
import { performance } from 'node:perf_hooks';
import { batchScript } from '../algorithms/batch.js';
import {
  type BatchOp,
  type ReadItem,
  ReplyWriter,
  readRequests,
} from '../algorithms/batch-wire.js';
import { ALGORITHMS } from '../algorithms/registry.js';
import type { LuaScript } from '../algorithms/script.js';
import { luaNumber, TAKE, type Twin, type TwinMode, type TwinState } from '../algorithms/twin.js';
import { InvalidInputError, StoreError } from '../errors.js';
import { resetEpochScript, resetEpochTwin } from '../limiter/reset-epoch.js';
import { optionalPositiveInteger, readProperty, rejectUnknownKeys } from '../validate.js';
import { decideItem, refusedBlock } from './block-twin.js';
import { PREFETCH_OPS, prefetchTwin } from './prefetch-twin.js';
import { PRICED_OPS, pricedTwin, takeMarks } from './priced-twin.js';
import { replyErrorText, retrySafeTwin } from './retry-safe-twin.js';
import type { ScriptStore } from './store.js';

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * The clock, in ms since the epoch (fractional ms give µs precision to GCRA). Default:
   * `performance.timeOrigin + performance.now()`. Inject one to control time in tests.
   */
  readonly clock?: () => number;
  /**
   * Most keys held at once: a positive safe integer, default 100,000. When full, expired
   * keys are dropped first, then the oldest — an evicted scope starts over, as on a Redis
   * that evicts (`evictions` counts them).
   */
  readonly maxKeys?: number;
}

interface Entry {
  readonly kind: string;
  value: unknown;
  /** ms; gone once the clock has passed it. */
  expireAt: number | undefined;
}

const TWINS = new Map<LuaScript, Twin>(ALGORITHMS.map((a) => [a.script, a.twin]));
const DRY: TwinMode = { dry: true, probe: false };
/** A probe that writes what a denial writes: repairs (TTLs, foreign state), never a take. */
const REPAIR: TwinMode = { dry: false, probe: true };
const WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value';

export class MemoryStore implements ScriptStore {
  readonly #entries = new Map<string, Entry>();
  readonly #clock: () => number;
  readonly #maxKeys: number;
  #evictions = 0;

  /** @throws {InvalidInputError} for a `clock` that is not a function or a bad `maxKeys`. */
  constructor(options: MemoryStoreOptions = {}) {
    const clock = readProperty(options, 'clock', 'options');
    rejectUnknownKeys(options, ['clock', 'maxKeys'], 'options');
    if (clock !== undefined && typeof clock !== 'function') {
      throw new InvalidInputError('options.clock', 'a function returning ms', clock);
    }
    this.#clock =
      (clock as (() => number) | undefined) ?? (() => performance.timeOrigin + performance.now());
    this.#maxKeys = optionalPositiveInteger(
      'options.maxKeys',
      readProperty(options, 'maxKeys', 'options'),
      100_000,
    );
  }

  /** The clock this store decides with (ms); the limiter's denial cache follows it. */
  get clock(): () => number {
    return this.#clock;
  }

  /** Keys held now (expired ones may linger until touched or swept). */
  get size(): number {
    return this.#entries.size;
  }

  /** Live keys dropped because `maxKeys` was reached. */
  get evictions(): number {
    return this.#evictions;
  }

  evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<unknown> {
    try {
      return Promise.resolve(this.run(script, keys, args));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Test-only: writes `value` into `key` as it is, replacing what the key held, expiring
   * `ttlMs` from now on this store's clock (`undefined`: no expiry), as a hand edit of Redis
   * would (the model tests seed the same foreign state into both stores). The value has the
   * shape a twin reads: a `'string'` key holds a string, a `'hash'` an object of field →
   * string, a `'zset'` an array of `[score, member]` pairs in Redis's order (score, then
   * member).
   *
   * @internal
   */
  seed(
    key: string,
    kind: 'string' | 'hash' | 'zset',
    value: unknown,
    ttlMs: number | undefined,
  ): void {
    this.#state().set(key, kind, value, ttlMs);
  }

  /** Runs `script` synchronously, at one instant of the clock, as Redis runs a script. */
  run(script: LuaScript, keys: readonly string[], args: readonly string[]): unknown {
    const state = this.#state();
    if (script === batchScript) return this.#batch(state, keys, args);
    if (script === resetEpochScript) return resetEpochTwin(state, keys, args);
    const twin = TWINS.get(script);
    if (twin === undefined)
      throw new StoreError(`NOSCRIPT no in-memory twin for script ${script.name}`);
    return twin(state, keys[0] as string, args, TAKE);
  }

  /** The batch script's semantics (see `batch.lua`): requests in order, errors isolated, a flat reply. */
  #batch(state: TwinState, keys: readonly string[], argv: readonly string[]): unknown[] {
    const reply = new ReplyWriter();
    for (const { op, items } of readRequests(keys, argv)) {
      if (PRICED_OPS.has(op)) pricedTwin(state, op, items, reply);
      else if (PREFETCH_OPS.has(op)) prefetchTwin(state, op, items, reply);
      else if (op === 'i') {
        retrySafeTwin(
          state,
          items,
          reply,
          (taken, writer) => this.#request(state, 't', taken, writer),
          (taken, ttl) => takeMarks(state, taken, ttl),
        );
      } else this.#request(state, op, items, reply);
    }
    return reply.finish();
  }

  /** One request of a batch, its slots written to `reply`. */
  #request(state: TwinState, op: BatchOp, items: readonly ReadItem[], reply: ReplyWriter): void {
    const decide = (item: ReadItem, mode: TwinMode) => {
      const twin = ALGORITHMS[item.batchId - 1]?.twin;
      if (twin === undefined) throw new Error(`ERR unknown algorithm id ${item.batchId}`);
      return decideItem(state, item.key, item.args, twin, mode);
    };
    const first = items[0] as ReadItem;
    try {
      if (op === 'r') {
        const existed = state.pttl(first.key) !== -2;
        if (existed) state.delete(first.key);
        state.delete(`${first.key}:b`); // its block, if any (see block.lua)
        // As batch.lua: a scope with reservations gets a new generation.
        const gkey = `${first.key}:g`;
        let old: number | undefined;
        try {
          const text = state.get<unknown>(gkey, 'string');
          old = text === undefined ? undefined : luaNumber(String(text));
        } catch {
          old = undefined;
        }
        if (old !== undefined)
          state.update(gkey, String(old >= state.nowUs ? old + 1 : state.nowUs));
        reply.item([existed ? 1 : 0, 0, 0, 0]);
      } else if (op === 'c') {
        // As batch.lua: SET NX PX, the first claim within the TTL.
        const claimed = state.pttl(first.key) === -2;
        if (claimed) state.set(first.key, 'string', '1', Number(first.args[0]));
        reply.item([claimed ? 1 : 0, 0, 0, 0]);
      } else if (op === 't' && items.length === 1) {
        reply.item(decide(first, TAKE));
      } else {
        const dry = items.map((item) => decide(item, DRY));
        if (op === 'p') for (const r of dry) reply.item(r);
        else if (dry.every((r) => r[0] === 1)) {
          for (const r of items.map((item) => decide(item, TAKE))) reply.item(r);
        } else {
          // As `batch.lua`: a probe that fails reports zeros, the request still answers.
          dry.forEach((r, j) => {
            let probed: readonly number[] = [0, 0, 0, 0];
            try {
              probed = decide(items[j] as ReadItem, REPAIR);
            } catch {}
            if (r[0] === 1) reply.item([0, probed[1], probed[2], 0]);
            else {
              const b = refusedBlock(
                state,
                (items[j] as ReadItem).key,
                (items[j] as ReadItem).args,
                r,
              );
              reply.item([0, b[1], b[2], b[3]]);
            }
          });
        }
      }
    } catch (error) {
      reply.failed(items.length, replyErrorText(error));
    }
  }

  #state(): TwinState {
    const nowFloat = this.#clock();
    const nowMs = Math.floor(nowFloat);
    const nowUs = Math.round(nowFloat * 1000);
    const entries = this.#entries;
    const live = (key: string): Entry | undefined => {
      const entry = entries.get(key);
      if (entry === undefined) return undefined;
      if (entry.expireAt !== undefined && nowMs > entry.expireAt) {
        entries.delete(key);
        return undefined;
      }
      return entry;
    };
    return {
      nowMs,
      nowUs,
      get: <T>(key: string, kind: string) => {
        const entry = live(key);
        if (entry === undefined) return undefined;
        if (entry.kind !== kind) throw new StoreError(WRONGTYPE);
        return entry.value as T;
      },
      set: (key, kind, value, ttlMs) => {
        const existing = live(key);
        if (existing === undefined) this.#makeRoom(nowMs);
        else entries.delete(key); // re-insert: the newest write is the last to be evicted
        entries.set(key, {
          kind,
          value,
          expireAt: ttlMs === undefined ? undefined : nowMs + ttlMs,
        });
      },
      update: (key, value) => {
        const entry = live(key);
        if (entry !== undefined) entry.value = value;
      },
      delete: (key) => {
        entries.delete(key);
      },
      pttl: (key) => {
        const entry = live(key);
        if (entry === undefined) return -2;
        return entry.expireAt === undefined ? -1 : entry.expireAt - nowMs;
      },
      pexpire: (key, ttlMs) => {
        const entry = live(key);
        if (entry !== undefined) entry.expireAt = nowMs + ttlMs;
      },
    };
  }

  #makeRoom(nowMs: number): void {
    if (this.#entries.size < this.#maxKeys) return;
    for (const [key, entry] of this.#entries) {
      if (entry.expireAt !== undefined && nowMs > entry.expireAt) this.#entries.delete(key);
    }
    while (this.#entries.size >= this.#maxKeys) {
      this.#entries.delete(this.#entries.keys().next().value as string);
      this.#evictions++;
    }
  }
}
