/**
 * Test-only: run the production scripts on Redis under a clock the test controls.
 *
 * A variant of each script is produced here, at test time, from the production source:
 * the block between `-- now:begin` and `-- now:end` (which reads Redis `TIME`) is replaced
 * by a read of the test clock key, and every TTL (`PEXPIRE key ttl`, `SET … PX ttl` with or
 * without `NX GET`, `PTTL key`) by a virtual expiry kept beside the key (`<key>:vexp`, in virtual ms), which
 * the variant applies before the algorithm runs exactly as Redis expires a key (gone once
 * the clock has passed it); a `DEL` or `UNLINK` of the key takes the virtual expiry with it.
 * Real TTLs could not follow a virtual clock. A script without a
 * `now` block (the fixed window, whose time is its key's TTL) gets the same prelude at its
 * top. The batch script is rebuilt from the clocked variants of every algorithm (its reset
 * deletes the virtual expiry too, and reports a virtually expired key as absent; the record of
 * a take with an id is read and written with a virtual expiry too). Production
 * scripts keep reading `TIME`; nothing here is reachable from the library.
 */

import type { ScriptStore } from 'sluice/store';
import { BATCH_ALGORITHMS, batchScript, buildBatch } from '../../src/algorithms/batch.js';
import type { LuaScript } from '../../src/algorithms/script.js';
import { scriptFromSource } from '../../src/algorithms/script.js';
import { settleOf } from '../../src/algorithms/settle/registry.js';
import { resetEpochScript } from '../../src/limiter/reset-epoch.js';
import { NodeRedisStore } from '../../src/redis/node-redis/stores.js';
import type { Client } from './redis.js';
import { variantsOf } from './variants.js';

export const CLOCK_KEY = 'sluice-test:now-us';

/** The test clock in virtual ms, as a Lua expression. */
const VNOW_MS = `math.floor(tonumber(redis.call('GET', '${CLOCK_KEY}')) / 1000)`;

export function clockedVariant(script: LuaScript): LuaScript {
  const block = /-- now:begin[^\n]*\n[\s\S]*?-- now:end/;
  const begin = block.exec(script.source);
  const micro = begin !== null && /µs/.test(begin[0].split('\n')[0] as string);
  const read = `tonumber(redis.call('GET', '${CLOCK_KEY}'))`;
  const prelude = [
    `local vnow_ms = ${VNOW_MS}`,
    ...(begin === null ? [] : [micro ? `local now = ${read}` : 'local now = vnow_ms']),
    "local vexp = redis.call('GET', KEYS[1] .. ':vexp')",
    "if vexp and vnow_ms > tonumber(vexp) then redis.call('DEL', KEYS[1], KEYS[1] .. ':vexp') end",
    // PTTL of the virtual expiry: -2 absent, -1 none, else ms left on the test clock.
    'local function vpttl(k)',
    "  if redis.call('EXISTS', k) == 0 then return -2 end",
    "  local at = redis.call('GET', k .. ':vexp')",
    '  if not at then return -1 end',
    '  return tonumber(at) - vnow_ms',
    'end',
    // PEXPIRETIME of the virtual expiry (a settle's mark of a fixed window).
    'local function vpexpiretime(k)',
    "  if redis.call('EXISTS', k) == 0 then return -2 end",
    "  local at = redis.call('GET', k .. ':vexp')",
    '  if not at then return -1 end',
    '  return tonumber(at)',
    'end',
    // SET k v NX GET with a virtual PX: the expiry only for a key it created.
    'local function vsetnx(k, v, ttl)',
    "  local old = redis.call('SET', k, v, 'NX', 'GET')",
    "  if not old then redis.call('SET', k .. ':vexp', string.format('%d', vnow_ms + ttl)) end",
    '  return old',
    'end',
  ].join('\n');
  const setVexp = (ttl: string) =>
    `redis.call('SET', key .. ':vexp', string.format('%d', vnow_ms + (${ttl})))`;
  // Without a `now` block, the prelude goes first (the fixed window reads no clock).
  const withPrelude =
    begin === null ? `${prelude}\n${script.source}` : script.source.replace(block, prelude);
  const source = rewriteCalls(
    rewriteCalls(
      withPrelude,
      'PEXPIRE',
      (ttl) =>
        // PEXPIRE of an absent key does nothing (a sorted set its trim emptied is gone).
        `if redis.call('EXISTS', key) == 1 then ${setVexp(ttl)} end`,
    ),
    'SET',
    (rest) => {
      // `SET key v 'PX' ttl 'NX' 'GET'` (create if absent, read what was there): an
      // expression, whose virtual expiry is set only when it created the key.
      const nxGet = /^(.*), 'PX', (.*), 'NX', 'GET'$/s.exec(rest);
      if (nxGet !== null) return `vsetnx(key, ${nxGet[1]}, ${nxGet[2]})`;
      const px = rest.lastIndexOf(", 'PX', ");
      if (px < 0) return `redis.call('SET', key, ${rest})`;
      return `redis.call('SET', key, ${rest.slice(0, px)}) ${setVexp(rest.slice(px + 8))}`;
    },
  )
    .replace(/redis\.call\('PTTL', key\)/g, 'vpttl(key)')
    .replace(/redis\.call\('PEXPIRETIME', key\)/g, 'vpexpiretime(key)')
    .replace(/redis\.call\('DEL', key\)/g, "redis.call('DEL', key, key .. ':vexp')")
    .replace(/redis\.call\('UNLINK', key\)/g, "redis.call('UNLINK', key, key .. ':vexp')");
  if (/PEXPIRE|'PX'|'PTTL'|'TIME'/.test(source))
    throw new Error(`${script.name}.lua: a TTL or a clock the clocked variant did not rewrite`);
  return scriptFromSource(`${script.name}+clock`, source, script.keyCount);
}

/**
 * Rewrites every `redis.call('<command>', key, <rest>)` (parentheses in `rest` balanced) to
 * `rewrite(rest)`.
 */
function rewriteCalls(source: string, command: string, rewrite: (rest: string) => string): string {
  const head = `redis.call('${command}', key, `;
  let out = '';
  let from = 0;
  for (let at = source.indexOf(head); at >= 0; at = source.indexOf(head, from)) {
    let depth = 1;
    let end = at + head.length;
    for (; depth > 0; end++) {
      if (end >= source.length) throw new Error(`unbalanced ${command} call`);
      if (source[end] === '(') depth++;
      else if (source[end] === ')') depth--;
    }
    out += source.slice(from, at) + rewrite(source.slice(at + head.length, end - 1));
    from = end;
  }
  return out + source.slice(from);
}

function replaceOnce(source: string, find: string, replacement: string): string {
  if (source.split(find).length !== 2) {
    throw new Error(`clocked batch: "${find}" is not in batch.lua exactly once`);
  }
  return source.replace(find, () => replacement);
}

/**
 * The batch script built from the clocked variant of every algorithm. Its reset (`DEL` of
 * the item's key) applies the virtual expiry first: a key the test clock has expired is
 * absent (reply 0), and its `<key>:vexp` goes with it.
 */
export function clockedBatch(): LuaScript {
  const built = buildBatch(
    BATCH_ALGORITHMS.map(clockedVariant),
    'batch+clock',
    BATCH_ALGORITHMS.map((script) => {
      const settle = settleOf(script)?.script;
      return settle && clockedVariant(settle);
    }),
  );
  const vdel = [
    'local function vdel(k)',
    "  local at = redis.call('GET', k .. ':vexp')",
    `  local expired = at and ${VNOW_MS} > tonumber(at)`,
    "  local n = redis.call('DEL', k)",
    "  redis.call('DEL', k .. ':vexp')",
    '  if expired then return 0 end',
    '  return n',
    'end',
    // A take with an id: its record read and written on the test clock.
    'local function vget(k)',
    "  local at = redis.call('GET', k .. ':vexp')",
    `  if at and ${VNOW_MS} > tonumber(at) then redis.call('DEL', k, k .. ':vexp') end`,
    "  return redis.call('GET', k)",
    'end',
    'local function vsetpx(k, v, ttl)',
    "  redis.call('SET', k, v)",
    `  redis.call('SET', k .. ':vexp', string.format('%d', ${VNOW_MS} + tonumber(ttl)))`,
    'end',
    '',
    'local out = {}',
  ].join('\n');
  let source = replaceOnce(built.source, '\nlocal out = {}\n', `\n${vdel}\n`);
  source = replaceOnce(
    source,
    "pcall(redis.call, 'UNLINK', KEYS[first])",
    'pcall(vdel, KEYS[first])',
  );
  source = replaceOnce(
    source,
    "pcall(redis.call, 'UNLINK', KEYS[first] .. ':b')",
    "pcall(vdel, KEYS[first] .. ':b')",
  );
  source = replaceOnce(source, "pcall(redis.call, 'GET', key)", 'pcall(vget, key)');
  source = replaceOnce(
    source,
    "pcall(redis.call, 'SET', record, table.concat(text, ','), 'PX', ttl)",
    "pcall(vsetpx, record, table.concat(text, ','), ttl)",
  );
  // Blocks (block.lua), on the test clock.
  source = replaceOnce(
    source,
    "local function block_pttl(k)\n  return redis.call('PTTL', k)\nend",
    [
      'local function block_pttl(k)',
      "  if redis.call('EXISTS', k) == 0 then return -2 end",
      "  local at = redis.call('GET', k .. ':vexp')",
      '  if not at then return -1 end',
      `  local left = tonumber(at) - ${VNOW_MS}`,
      "  if left < 0 then redis.call('DEL', k, k .. ':vexp') return -2 end",
      '  return left',
      'end',
    ].join('\n'),
  );
  source = replaceOnce(
    source,
    "  redis.call('SET', k, level, 'PX', ttl)\n",
    '  vsetpx(k, level, ttl)\n',
  );
  // The scope's generation (settle/priced.lua), on the test clock: its key expires with the
  // records it outlives, virtually (a real TTL of a few ms would end it mid-test).
  source = replaceOnce(
    source,
    [
      "  local ok, text = pcall(redis.call, 'GET', gkey)",
      "  local g = ok and tonumber(text or '0') or 0",
      '  if g ~= math.floor(g) or g < 0 then g = 0 end',
      '  if ttl then',
      '    if g == 0 then',
      "      local t = redis.call('TIME')",
      '      g = tonumber(t[1]) * 1000000 + tonumber(t[2])',
      "      redis.call('SET', gkey, string.format('%d', g), 'PX', ttl)",
      '    else',
      "      redis.call('PEXPIRE', gkey, ttl)",
      '    end',
      '  end',
    ].join('\n'),
    [
      '  local ok, text = pcall(vget, gkey)',
      "  local g = ok and tonumber(text or '0') or 0",
      '  if g ~= math.floor(g) or g < 0 then g = 0 end',
      '  if ttl then',
      `    if g == 0 then g = tonumber(redis.call('GET', '${CLOCK_KEY}')) end`,
      "    vsetpx(gkey, string.format('%d', g), ttl)",
      '  end',
    ].join('\n'),
  );
  // The records of reserve, settle, refund and charge (settle/priced.lua), on the test clock.
  source = replaceOnce(
    source,
    "local function record_get(k)\n  return redis.call('GET', k)\nend",
    'local function record_get(k)\n  return vget(k)\nend',
  );
  source = replaceOnce(
    source,
    "    redis.call('SET', k, v, 'PX', ttl)\n",
    '    vsetpx(k, v, ttl)\n',
  );
  source = replaceOnce(
    source,
    "local function record_del(k)\n  redis.call('DEL', k)\nend",
    "local function record_del(k)\n  redis.call('DEL', k, k .. ':vexp')\nend",
  );
  source = replaceOnce(
    source,
    "  local left = redis.call('PTTL', k)\n  if left < 0 or left > tonumber(cap) then redis.call('PEXPIRE', k, cap) end\n",
    [
      "  local at = redis.call('GET', k .. ':vexp')",
      `  local left = at and tonumber(at) - ${VNOW_MS} or -1`,
      '  if left < 0 or left > tonumber(cap) then',
      `    redis.call('SET', k .. ':vexp', string.format('%d', ${VNOW_MS} + tonumber(cap)))`,
      '  end',
      '',
    ].join('\n'),
  );
  const vttl = (k: string) =>
    `(redis.call('GET', ${k} .. ':vexp') and tonumber(redis.call('GET', ${k} .. ':vexp')) - ${VNOW_MS} or -1)`;
  source = replaceOnce(
    source,
    "local function record_ttl(k)\n  return redis.call('PTTL', k)\nend",
    `local function record_ttl(k)\n  return ${vttl('k')}\nend`,
  );
  source = replaceOnce(
    source,
    "if ok and redis.call('PTTL', key) < 0 then slots = nil end",
    `if ok and ${vttl('key')} < 0 then slots = nil end`,
  );
  // An untrusted record of a take with an id (batch.lua), removed with its virtual expiry.
  source = replaceOnce(
    source,
    "  redis.call('DEL', key)\n  return false\n",
    "  redis.call('DEL', key, key .. ':vexp')\n  return false\n",
  );
  return scriptFromSource(built.name, source, built.keyCount);
}

/** One cache for every store: a variant is built once per script and process. */
const clocked = variantsOf((script) => {
  if (script === batchScript) return clockedBatch();
  // The reset epoch concerns denial caches (on real time); it runs as it is.
  if (script === resetEpochScript) return script;
  return clockedVariant(script);
});

/**
 * A store that runs the clocked variant of each script (the batch script included), after
 * setting the test clock, as the library's own store sends scripts (EVALSHA, then EVAL
 * after NOSCRIPT; error replies become `StoreError`).
 */
export class ClockedRedisStore implements ScriptStore {
  nowUs = 0;
  readonly #store: NodeRedisStore;

  constructor(private readonly client: Client) {
    // node-redis alone: the clock's SET and the script go over one connection, in order.
    this.#store = new NodeRedisStore(client.client);
  }

  async evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<unknown> {
    const variant = clocked(script);
    // One connection runs commands in order: the clock is set before the script runs.
    const [, reply] = await Promise.all([
      this.client.client.set(CLOCK_KEY, String(this.nowUs)),
      this.#store.evalScript(variant, keys, args),
    ]);
    return reply;
  }
}
