/**
 * The batch script: the template in `batch.lua` with every algorithm's body inserted as a
 * function of `(KEYS, ARGV)`. An algorithm file reads `KEYS[1]` and `ARGV[i]`; inside such a
 * function those names are the function's parameters, so the body runs unchanged — one
 * source of truth per algorithm, whether decided alone or in a batch.
 */
import { readFileSync } from 'node:fs';
import { fixedWindowScript } from './fixed-window.js';
import { type LuaScript, scriptFromSource } from './script.js';

/** Algorithms a batch can run, by id (the id is what a batch item sends). */
export const BATCH_ALGORITHMS: readonly LuaScript[] = [fixedWindowScript];

/** The id of `script` in a batch, or `undefined` if batches cannot run it. */
export function batchId(script: LuaScript): number | undefined {
  const index = BATCH_ALGORITHMS.indexOf(script);
  return index < 0 ? undefined : index + 1;
}

function build(): LuaScript {
  const template = readFileSync(new URL('./batch.lua', import.meta.url), 'utf8');
  const functions = BATCH_ALGORITHMS.map(
    (script, i) =>
      `-- ${script.name}\nALGORITHMS[${i + 1}] = function(KEYS, ARGV)\n${script.source}\nend`,
  ).join('\n\n');
  return scriptFromSource('batch', template.replace('--[[ALGORITHMS]]--', functions), 0);
}

/** The batch script (its key count varies per call). */
export const batchScript: LuaScript = build();
