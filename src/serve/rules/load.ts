/**
 * Reads the rule files: every file of a directory (as the reference loads
 * `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`), or one file. Names starting
 * with a dot are skipped — a Kubernetes ConfigMap volume keeps its data in `..data/` and
 * `..<timestamp>/`, and shows each key as a symlink into them, which is followed.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidInputError } from '../../errors.js';
import type { Policies } from '../policies.js';
import { RuleFileError } from './errors.js';
import { parseRuleFile, type RuleFile } from './parse.js';
import { RuleSet } from './tree.js';

/** The files' text, read together, and a digest of it all (to see whether anything changed). */
export interface RuleTexts {
  readonly files: readonly { readonly name: string; readonly text: string }[];
  readonly digest: string;
}

/**
 * Reads every rule file of `path` (a directory, or one file), in name order.
 *
 * @throws {RuleFileError} the path or a file cannot be read.
 */
export async function readRuleTexts(path: string): Promise<RuleTexts> {
  const names = await ruleFileNames(path);
  const files: { name: string; text: string }[] = [];
  const hash = createHash('sha256');
  for (const name of names) {
    let text: string;
    try {
      text = await readFile(name, 'utf8');
    } catch (error) {
      throw new RuleFileError(name, '(file)', `cannot be read (${(error as Error).message})`);
    }
    files.push({ name, text });
    hash.update(`${name}\0${text}\0`);
  }
  return { files, digest: hash.digest('hex') };
}

/**
 * Parses and checks the files and builds the rule set, with every rule's policy built once
 * (so that a limit sluice cannot decide is an error of the file, never of a request).
 *
 * @throws {RuleFileError} the first problem of each file that does not parse (every such
 *   file, one line each in the message; the fields name the first), else the first problem
 *   across files (see `RuleSet`), or a limit its algorithm refuses (e.g. a
 *   sliding-window-log limit above its bound).
 */
export function buildRuleSet(texts: RuleTexts, merge: boolean, policies: Policies): RuleSet {
  const parsed: RuleFile[] = [];
  const failed: RuleFileError[] = [];
  for (const f of texts.files) {
    try {
      parsed.push(parseRuleFile(f.name, f.text));
    } catch (error) {
      failed.push(
        error instanceof RuleFileError
          ? error
          : new RuleFileError(f.name, '(document)', `cannot be loaded: ${String(error)}`),
      );
    }
  }
  const first = failed[0];
  if (first !== undefined) {
    first.message = failed.map((e) => e.message).join('\n');
    throw first;
  }
  const rules = new RuleSet(parsed, merge);
  for (const rule of rules.rules) {
    if (rule.limit.unlimited || rule.limit.requestsPerUnit === 0) continue;
    try {
      policies.ofRule(rule);
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      throw new RuleFileError(rule.file, rule.path, `cannot be decided: ${error.message}`);
    }
  }
  return rules;
}

async function ruleFileNames(path: string): Promise<string[]> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(path);
  } catch (error) {
    throw new RuleFileError(path, '(file)', `cannot be read (${(error as Error).message})`);
  }
  if (!info.isDirectory()) return [path];
  const names: string[] = [];
  for (const entry of (await readdir(path)).sort()) {
    if (entry.startsWith('.')) continue;
    const full = join(path, entry);
    try {
      if ((await stat(full)).isFile()) names.push(full);
    } catch {
      // A dangling symlink mid-swap: the next reload sees the new one.
    }
  }
  return names;
}
