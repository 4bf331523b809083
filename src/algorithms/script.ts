/**
 * A Lua script as one object: its source, read from the `.lua` file next to the module
 * that defines it, and its SHA-1, computed from the text (never pasted), so EVALSHA and the
 * source cannot drift apart.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface LuaScript {
  /** Short name, for errors and metrics. */
  readonly name: string;
  /** The Lua source sent with EVAL when the server's script cache lacks it. */
  readonly source: string;
  /** SHA-1 hex digest of `source`, sent with EVALSHA. */
  readonly sha1: string;
  /** Number of KEYS the script takes. */
  readonly keyCount: number;
}

/** Loads `<name>.lua` from the folder of `baseUrl` (pass `import.meta.url`). */
export function loadScript(name: string, baseUrl: string, keyCount: number): LuaScript {
  return scriptFromSource(name, readFileSync(new URL(`./${name}.lua`, baseUrl), 'utf8'), keyCount);
}

/** A script object for Lua source built in code (e.g. the batch script). */
export function scriptFromSource(name: string, source: string, keyCount: number): LuaScript {
  const sha1 = createHash('sha1').update(source).digest('hex');
  return Object.freeze({ name, source, sha1, keyCount });
}
