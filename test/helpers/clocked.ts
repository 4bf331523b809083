/**
 * Test-only: run the production scripts on Redis under a clock the test controls.
 *
 * A variant of each script is produced here, at test time, from the production source:
 * the block between `-- now:begin` and `-- now:end` (which reads Redis `TIME`) is replaced
 * by a read of the test clock key, and every TTL is lengthened to an hour, since virtual and
 * real time diverge (each algorithm is built so that an expired key means the same as its
 * stored state at that time, so TTLs never change a decision). Production scripts keep
 * reading `TIME`; nothing here is reachable from the library.
 */
import type { LuaScript } from '../../src/algorithms/script.js';
import { scriptFromSource } from '../../src/algorithms/script.js';
import type { ScriptStore } from '../../src/stores/store.js';
import type { Client } from './redis.js';

export const CLOCK_KEY = 'sluice-test:now-us';

export function clockedVariant(script: LuaScript): LuaScript {
  const block = /-- now:begin[^\n]*\n[\s\S]*?-- now:end/;
  const begin = block.exec(script.source);
  if (begin === null) throw new Error(`${script.name}.lua has no now:begin … now:end block`);
  const micro = /µs/.test(begin[0].split('\n')[0] as string);
  const read = `tonumber(redis.call('GET', '${CLOCK_KEY}'))`;
  const now = micro ? `local now = ${read}` : `local now = math.floor(${read} / 1000)`;
  const source = script.source
    .replace(block, now)
    .replace(/'PEXPIRE', key, .*\)$/gm, "'PEXPIRE', key, 3600000)")
    .replace(/'PX', .*\)$/gm, "'PX', 3600000)");
  return scriptFromSource(`${script.name}+clock`, source, script.keyCount);
}

/** A store that runs the clocked variant of each script, after setting the test clock. */
export class ClockedRedisStore implements ScriptStore {
  readonly #variants = new Map<LuaScript, LuaScript>();
  nowUs = 0;

  constructor(private readonly client: Client) {}

  async evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<unknown> {
    let variant = this.#variants.get(script);
    if (variant === undefined) {
      variant = clockedVariant(script);
      this.#variants.set(script, variant);
    }
    await this.client.set(CLOCK_KEY, String(this.nowUs));
    return this.client.sendCommand(['EVAL', variant.source, String(keys.length), ...keys, ...args]);
  }
}
