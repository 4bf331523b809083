/**
 * The in-memory twin of each algorithm: a TypeScript function that mirrors its Lua script
 * line for line (same integer arithmetic, same reply), run by `MemoryStore`. The
 * model-based tests hold the two to identical decisions under a controlled clock.
 *
 * What an algorithm's in-memory twin sees: the store's state and clock, with Redis's
 * semantics (a key is gone once its expiry time has passed; a key holds one kind of value).
 */
export interface TwinState {
  /** Now, in ms (integer): what `TIME` gives a ms script. */
  readonly nowMs: number;
  /** Now, in µs (integer): what `TIME` gives a µs-script. */
  readonly nowUs: number;
  /** The value of `key` of `kind`, or undefined when absent/expired. Throws WRONGTYPE for another kind. */
  get<T>(key: string, kind: string): T | undefined;
  /** Sets `key` to `value` of `kind`, expiring `ttlMs` from now (undefined: no expiry). */
  set(key: string, kind: string, value: unknown, ttlMs: number | undefined): void;
  /** ms until `key` expires: -2 absent, -1 no expiry (Redis PTTL). */
  pttl(key: string): number;
  /** Deletes `key` (as Redis does with a sorted set whose last member was removed). */
  delete(key: string): void;
  /** Replaces the value of an existing key, keeping its expiry (like INCRBY, ZADD, HSET). */
  update(key: string, value: unknown): void;
  /** Sets the expiry of an existing key (Redis PEXPIRE). */
  pexpire(key: string, ttlMs: number): void;
}

/** An algorithm's decision in memory: the same reply array its Lua script returns. */
export type Twin = (
  state: TwinState,
  key: string,
  args: readonly string[],
  mode: TwinMode,
) => [number, number, number, number];

/** The script's ARGV as integers (the builders send only integers). */
export function numbers(args: readonly string[], count: 3): [number, number, number];
export function numbers(args: readonly string[], count: 4): [number, number, number, number];
export function numbers(args: readonly string[], count: number): number[] {
  const values: number[] = [];
  for (let i = 0; i < count; i++) values.push(Number(args[i]));
  return values;
}

/**
 * What Lua's `tonumber` gives for a value read from Redis (a reply string, or a number a
 * twin stored), for the decimal forms sluice and its tests write; `undefined` for anything
 * else (absent, `"abc"`). Foreign state is judged by the same rule on both stores.
 */
export function luaNumber(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string') return undefined;
  const text = value.trim();
  if (/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return Number(text);
  if (/^-?inf$/i.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  return undefined;
}

/** True for an integer in `[min, max]` (what the scripts accept as their own state). */
export function intIn(value: number | undefined, min: number, max: number): value is number {
  return value !== undefined && Number.isInteger(value) && value >= min && value <= max;
}

/** How a twin runs: a take, or dry (nothing written) and probe (dry, a cost that never fits). */
export interface TwinMode {
  readonly dry: boolean;
  readonly probe: boolean;
}

/** A take. */
export const TAKE: TwinMode = { dry: false, probe: false };
