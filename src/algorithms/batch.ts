/**
 * The batch script: the template in `batch.lua` with every algorithm's body inserted as a
 * function of `(i, base, dry, probe, known)` — item `i`'s key is `KEYS[i]` and its arguments start
 * after `ARGV[base]`. An algorithm file reads only `KEYS[1]` and `ARGV[<literal n>]`; building
 * the batch rewrites those to `KEYS[i]` and `ARGV[base + n]`, and drops the file's
 * `mode:begin … mode:end` block (a lone take's `dry, probe = false, false`), so each body runs
 * unchanged (one source of truth per algorithm, for take, peek and takeAll, alone or in a
 * batch) without copying arguments into a table per item.
 */
import { readFileSync } from 'node:fs';
import { ALGORITHMS } from './registry.js';
import { type LuaScript, scriptFromSource } from './script.js';
import { settleOf } from './settle/registry.js';

/** Algorithms a batch can run, by id − 1 (the id is what a batch item sends). */
export const BATCH_ALGORITHMS: readonly LuaScript[] = ALGORITHMS.map(
  (algorithm) => algorithm.script,
);

/** The settle body of each batch algorithm, by id − 1 (undefined: none). */
const SETTLE_SCRIPTS: readonly (LuaScript | undefined)[] = BATCH_ALGORITHMS.map(
  (script) => settleOf(script)?.script,
);

/** The work of one item of batch id `id` under a policy of this `limit` (see `Algorithm.work`). */
export function batchWork(id: number, limit: number): number {
  return ALGORITHMS[id - 1]?.work(limit) ?? 1;
}

/** The id of `script` in a batch, or `undefined` if batches cannot run it. */
export function batchId(script: LuaScript): number | undefined {
  const index = BATCH_ALGORITHMS.indexOf(script);
  return index < 0 ? undefined : index + 1;
}

/**
 * An algorithm body rewritten to read item `i`'s key and the arguments after `ARGV[base]`.
 * `modal`: a take's body, which has a `mode:begin … mode:end` block (a settle body has none).
 */
export function batchBody(script: LuaScript, modal = true): string {
  const mode = /-- mode:begin[\s\S]*?-- mode:end[^\n]*\n/;
  if (modal && !mode.test(script.source)) {
    throw new Error(`${script.name}.lua has no mode:begin … mode:end block`);
  }
  const body = script.source
    .replace(mode, '')
    .replace(/\bKEYS\[1\]/g, 'KEYS[i]')
    .replace(/\bARGV\[(\d+)\]/g, (_, n: string) => `ARGV[base + ${n}]`);
  const code = body.replace(/--.*$/gm, '');
  const stray = /\b(KEYS|ARGV)\b(?!\[(i|base \+ \d+)\])/.exec(code);
  if (stray !== null) {
    throw new Error(
      `${script.name}.lua: a batchable script may use only KEYS[1] and ARGV[<n>] (found "${stray[0]}")`,
    );
  }
  return body;
}

const template = readFileSync(new URL('./batch.lua', import.meta.url), 'utf8');
const pricedTemplate = readFileSync(new URL('./settle/priced.lua', import.meta.url), 'utf8');
const prefetchSource = readFileSync(new URL('./settle/prefetch.lua', import.meta.url), 'utf8');
const blockSource = readFileSync(new URL('./block.lua', import.meta.url), 'utf8');

/**
 * Builds a batch script from `scripts`, in batch-id order (the production batch from the
 * production scripts; tests build one from variants of them), with `settles`, the settle
 * body of each (see `settle/registry.ts`; undefined: the algorithm has none).
 */
export function buildBatch(
  scripts: readonly LuaScript[],
  name = 'batch',
  settles: readonly (LuaScript | undefined)[] = SETTLE_SCRIPTS,
): LuaScript {
  const settleFunctions = settles
    .map((settle, i) =>
      settle === undefined
        ? ''
        : `-- ${settle.name}\nSETTLE[${i + 1}] = function(i, base, delta, mark, cost)\n${batchBody(settle, false)}\nend`,
    )
    .join('\n\n');
  const priced = pricedTemplate.replace('--[[SETTLE]]--', () => settleFunctions);
  // Inside algorithm_of(id) (see batch.lua): only the function of an id asked for is made.
  const functions = scripts
    .map(
      (script, i) =>
        `${i === 0 ? 'if' : 'elseif'} id == ${i + 1} then\n-- ${script.name}\nALGORITHMS[${i + 1}] = function(i, base, dry, probe, known)\n${batchBody(script)}\nend`,
    )
    .join('\n\n')
    .concat(scripts.length > 0 ? '\nend' : '');
  return scriptFromSource(
    name,
    template
      .replace('--[[ALGORITHMS]]--', () => functions)
      .replace('--[[BLOCK]]--', () => blockSource)
      .replace('--[[PRICED]]--', () => `${priced}\n${prefetchSource}`),
    0,
  );
}

/** The batch script (its key count varies per call). */
export const batchScript: LuaScript = buildBatch(BATCH_ALGORITHMS);

/**
 * The batch script for Redis Cluster: one call runs the takes of one turn whose keys are in
 * several slots of one node. It declares `allow-cross-slot-keys` (Redis ≥ 7.0) and takes no
 * declared keys — Redis refuses a command whose declared keys span slots (`CROSSSLOT`)
 * before running it — but reads them from ARGV: `ARGV[1]` = the key count n, `ARGV[2..n+1]`
 * = the keys, then the batch's own ARGV; the prelude turns them back into `KEYS` and `ARGV`
 * (locals that every body below sees). A key of a slot the node does not serve fails its own
 * request at its first access — a read, before anything of that request is written — with
 * "non local key"; the coalescer sends that request again, alone.
 */
export const crossSlotBatchScript: LuaScript = scriptFromSource(
  'batch-cross-slot',
  `#!lua flags=allow-cross-slot-keys
-- Keys come in ARGV (see crossSlotBatchScript in batch.ts).
local KEYS, ARGV = (function(argv)
  local n = tonumber(argv[1])
  local keys, rest = {}, {}
  for i = 1, n do keys[i] = argv[1 + i] end
  for i = n + 2, #argv do rest[#rest + 1] = argv[i] end
  return keys, rest
end)(ARGV)
${batchScript.source}`,
  0,
);
