/**
 * Test-only: a decision log written by Redis itself, for the soak test.
 *
 * A variant of each production script (the single-decision scripts and the batch script) is
 * produced here from the production source. It runs the algorithm unchanged and, inside the
 * same atomic script call, appends every *admitted* decision to a Redis stream: the key, the
 * Redis server time the algorithm decided on (the very `TIME` reply its `now` was computed
 * from, in µs; the fixed window, which keeps time in TTLs, is stamped with a `TIME` read in
 * the same call just before the algorithm runs — never after: a window's key expires at its
 * `SET … PX` plus the window, so a stamp read after the `SET` is late by however long Redis was
 * descheduled in between (2 ms in one loaded CI run), and the next window then looked early),
 * the algorithm's arguments and its reply. Nothing here is reachable from the library.
 */

import type { ScriptStore } from 'sluice/store';
import { batchScript } from '../../src/algorithms/batch.js';
import type { LuaScript } from '../../src/algorithms/script.js';
import { scriptFromSource } from '../../src/algorithms/script.js';
import { variantsOf } from './variants.js';

export const LOG_KEY = 'sluice-test:decision-log';

/** Lua that appends `reply` (admitted only) for `key` with its `args` to the log. */
function logStatement(keyExpr: string, argsExpr: string): string {
  return `
if reply[1] == 1 then
  local t = log_time
  redis.call('XADD', '${LOG_KEY}', '*', 'key', ${keyExpr},
    'us', t[1] .. string.format('%06d', tonumber(t[2])),
    'args', ${argsExpr}, 'reply', table.concat(reply, ','))
end`;
}

function replaceOnce(source: string, find: string, replacement: string, what: string): string {
  if (!source.includes(find)) throw new Error(`decision log: ${what} not found`);
  return source.replace(find, replacement);
}

/** Captures the algorithm's own `TIME` reply into the upvalue `log_time`. */
function captureTime(source: string): string {
  return source.replaceAll('-- now:end', '-- now:end\nlog_time = time');
}

export function loggedVariant(script: LuaScript): LuaScript {
  if (script === batchScript) {
    let source = replaceOnce(
      captureTime(script.source),
      'local ALGORITHMS = {}',
      'local log_time\nlocal ALGORITHMS = {}',
      'the batch table',
    );
    // Every admitted take (not a dry run: peeks and takeAll's first pass write nothing).
    source = replaceOnce(
      source,
      '  return pcall(algorithm, i, base, dry, probe, known)\n',
      `  log_time = redis.call('TIME')
  local ok, reply = pcall(algorithm, i, base, dry, probe, known)
  if ok and not dry then
${logStatement('KEYS[i]', "table.concat(ARGV, ',', base + 1, base + tonumber(ARGV[base]))")}
  end
  return ok, reply
`,
      'the decide function',
    );
    return scriptFromSource('batch+log', source, script.keyCount);
  }
  const source = [
    'local log_time',
    'local function decide()',
    captureTime(script.source),
    'end',
    "log_time = redis.call('TIME')",
    'local reply = decide()',
    logStatement('KEYS[1]', "table.concat(ARGV, ',')"),
    'return reply',
  ].join('\n');
  return scriptFromSource(`${script.name}+log`, source, script.keyCount);
}

/** A store that runs the logged variant of every script through `inner`. */
export class DecisionLogStore implements ScriptStore {
  readonly #variant = variantsOf(loggedVariant);
  constructor(private readonly inner: ScriptStore) {}

  evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<unknown> {
    return this.inner.evalScript(this.#variant(script), keys, args);
  }
}

/** One admitted decision, as Redis logged it. */
export interface LoggedAdmission {
  readonly key: string;
  /** Redis server time of the decision, µs since the epoch. */
  readonly us: number;
  readonly args: readonly number[];
  /** `[allowed, remaining, resetMs, retryAfterMs]`. */
  readonly reply: readonly number[];
}

/** Reads the whole log in order (stream order is execution order). */
export async function readDecisionLog(client: {
  sendCommand(args: string[]): Promise<unknown>;
}): Promise<LoggedAdmission[]> {
  const out: LoggedAdmission[] = [];
  let start = '-';
  for (;;) {
    const page = (await client.sendCommand(['XRANGE', LOG_KEY, start, '+', 'COUNT', '10000'])) as [
      string,
      string[],
    ][];
    for (const [, fields] of page) {
      const f: Record<string, string> = {};
      for (let i = 0; i < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
      out.push({
        key: f.key as string,
        us: Number(f.us),
        args: (f.args as string).split(',').map(Number),
        reply: (f.reply as string).split(',').map(Number),
      });
    }
    if (page.length < 10000) return out;
    start = `(${(page[page.length - 1] as [string, string[]])[0]}`;
  }
}
