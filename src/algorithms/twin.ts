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

/** C `isspace` in the "C" locale: what `strtod` skips before, and Lua after, a number. */
const C_SPACE = '[ \\t\\n\\v\\f\\r]*';
const DECIMAL = new RegExp(
  `^${C_SPACE}([+-]?(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][+-]?\\d+)?)${C_SPACE}$`,
);
const HEX = new RegExp(
  `^${C_SPACE}([+-]?)0[xX]([0-9a-fA-F]*)(?:\\.([0-9a-fA-F]*))?(?:[pP]([+-]?\\d+))?${C_SPACE}$`,
);
const SPECIAL = new RegExp(
  `^${C_SPACE}([+-]?)(inf|infinity|nan(?:\\([0-9A-Za-z_]*\\))?)${C_SPACE}$`,
  'i',
);

/**
 * What Lua's `tonumber` gives for a value read from Redis (a reply string, or a number a
 * twin stored); `undefined` where it gives nil (absent, `"abc"`, `""`). Redis's Lua 5.1
 * parses with C `strtod` (then `strtoul` base 16) and allows surrounding whitespace, so
 * `" 5"`, `"+5"`, `"0x10"`, `"1e2"`, `"inf"`, `"infinity"` and `"nan"` are numbers too.
 * Foreign state is judged by the same rule on both stores.
 */
export function luaNumber(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string') return undefined;
  const decimal = DECIMAL.exec(value);
  // -0 is read as 0: no script tells them apart, and Redis replies with an integer 0.
  if (decimal !== null) return Number(decimal[1]) + 0;
  const hex = HEX.exec(value);
  if (hex !== null) {
    const [, sign, whole = '', fraction = '', exponent = '0'] = hex;
    if (whole === '' && fraction === '') return undefined; // "0x": strtod stops at the x
    const mantissa = Number(BigInt(`0x${whole}${fraction}`));
    const magnitude = mantissa * 2 ** (Number(exponent) - 4 * fraction.length);
    return sign === '-' ? -magnitude + 0 : magnitude;
  }
  const special = SPECIAL.exec(value);
  if (special !== null) {
    if ((special[2] as string).toLowerCase().startsWith('nan')) return Number.NaN;
    return special[1] === '-' ? -Infinity : Infinity;
  }
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
