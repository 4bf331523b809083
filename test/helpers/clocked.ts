/**
 * Test-only: run the production scripts on Redis under a clock the test controls.
 *
 * A variant of each script is produced here, at test time, from the production source:
 * the block between `-- now:begin` and `-- now:end` (which reads Redis `TIME`) is replaced
 * by a read of the test clock key, and every TTL (`PEXPIRE key ttl`, `SET … PX ttl`) by a
 * virtual expiry kept beside the key (`<key>:vexp`, in virtual ms), which the variant
 * applies before the algorithm runs exactly as Redis expires a key (gone once the clock has
 * passed it). Real TTLs could not follow a virtual clock. Production scripts keep reading
 * `TIME`; nothing here is reachable from the library.
 */
import type { LuaScript } from '../../src/algorithms/script.js';
import { scriptFromSource } from '../../src/algorithms/script.js';
import type { ScriptStore } from '../../src/stores/store.js';
import type { Client } from './redis.js';
import { variantsOf } from './variants.js';

export const CLOCK_KEY = 'sluice-test:now-us';

export function clockedVariant(script: LuaScript): LuaScript {
  const block = /-- now:begin[^\n]*\n[\s\S]*?-- now:end/;
  const begin = block.exec(script.source);
  if (begin === null) throw new Error(`${script.name}.lua has no now:begin … now:end block`);
  const micro = /µs/.test(begin[0].split('\n')[0] as string);
  const read = `tonumber(redis.call('GET', '${CLOCK_KEY}'))`;
  const prelude = [
    `local vnow_ms = math.floor(${read} / 1000)`,
    micro ? `local now = ${read}` : 'local now = vnow_ms',
    "local vexp = redis.call('GET', KEYS[1] .. ':vexp')",
    "if vexp and vnow_ms > tonumber(vexp) then redis.call('DEL', KEYS[1], KEYS[1] .. ':vexp') end",
    // PTTL of the virtual expiry: -2 absent, -1 none, else ms left on the test clock.
    'local function vpttl(k)',
    "  if redis.call('EXISTS', k) == 0 then return -2 end",
    "  local at = redis.call('GET', k .. ':vexp')",
    '  if not at then return -1 end',
    '  return tonumber(at) - vnow_ms',
    'end',
  ].join('\n');
  const setVexp = (ttl: string) =>
    `redis.call('SET', key .. ':vexp', string.format('%d', vnow_ms + (${ttl})))`;
  const source = script.source
    .replace(block, prelude)
    .replace(/redis\.call\('PTTL', key\)/g, 'vpttl(key)')
    .replace(/redis\.call\('DEL', key\)/g, "redis.call('DEL', key, key .. ':vexp')")
    .replace(/redis\.call\('PEXPIRE', key, (.*)\)$/gm, (_, ttl: string) => setVexp(ttl))
    .replace(
      /(redis\.call\('SET', key, .*), 'PX', (.*)\)$/gm,
      (_, set: string, ttl: string) => `${set}) ${setVexp(ttl)}`,
    );
  if (/PEXPIRE|'PX'|'PTTL'/.test(source))
    throw new Error(`${script.name}.lua: a TTL the clocked variant did not rewrite`);
  return scriptFromSource(`${script.name}+clock`, source, script.keyCount);
}

/** A store that runs the clocked variant of each script, after setting the test clock. */
export class ClockedRedisStore implements ScriptStore {
  readonly #variant = variantsOf(clockedVariant);
  nowUs = 0;

  constructor(private readonly client: Client) {}

  async evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<unknown> {
    const variant = this.#variant(script);
    await this.client.set(CLOCK_KEY, String(this.nowUs));
    return this.client.sendCommand(['EVAL', variant.source, String(keys.length), ...keys, ...args]);
  }
}
