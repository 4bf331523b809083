/**
 * The configuration being served, kept up to date: loaded at start, then reloaded when the
 * files change — on a file-system event of the directory (a ConfigMap's symlink swap renames
 * `..data`) and, since events are not reliable on every volume, on a poll that compares a
 * digest of every file. A file that does not load keeps the last good configuration serving
 * and is reported (`onReload` with the error).
 */
import { type FSWatcher, watch } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Policies } from '../policies.js';
import { RuleFileError } from './errors.js';
import { buildRuleSet, readRuleTexts } from './load.js';
import type { RuleSet } from './tree.js';

/** How long file events must pause before the files are read, in ms. */
const SETTLE_MS = 100;

/** One reload's outcome, for logs and metrics. */
export type ReloadEvent =
  | { readonly ok: true; readonly rules: RuleSet }
  | { readonly ok: false; readonly error: RuleFileError };

export interface RuleSourceOptions {
  /** A directory of rule files, or one file. */
  readonly path: string;
  /** `MERGE_DOMAIN_CONFIG`. */
  readonly merge: boolean;
  /** How often to compare the files' digest, in ms; 0: never (events only). */
  readonly pollMs: number;
  /** The policies the rules are decided by (each rule's built at load). */
  readonly policies: Policies;
  readonly onReload: (event: ReloadEvent) => void;
}

export class RuleSource {
  readonly #options: RuleSourceOptions;
  #current: RuleSet | undefined;
  #digest: string | undefined;
  #lastError: RuleFileError | undefined;
  #watcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  #settle: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;

  constructor(options: RuleSourceOptions) {
    this.#options = options;
  }

  /** The configuration being served; undefined until one loaded. */
  get current(): RuleSet | undefined {
    return this.#current;
  }

  /** The last reload's error, while the files on disk do not load; else undefined. */
  get lastError(): RuleFileError | undefined {
    return this.#lastError;
  }

  /** Loads the files once, then watches them. Resolves after the first load, good or bad. */
  async start(): Promise<void> {
    await this.check();
    const path = this.#options.path;
    let dir = path;
    try {
      if (!(await stat(path)).isDirectory()) dir = dirname(path);
    } catch {
      dir = dirname(path);
    }
    try {
      // A burst of events (an editor's save, a ConfigMap swap): one check once it settles,
      // so that a file is not read half written.
      this.#watcher = watch(dir, { persistent: false }, () => {
        clearTimeout(this.#settle);
        this.#settle = setTimeout(() => this.check().catch(() => {}), SETTLE_MS);
        this.#settle.unref();
      });
      this.#watcher.on('error', () => {});
    } catch {
      // No events on this volume: the poll does the work.
    }
    if (this.#options.pollMs > 0) {
      this.#timer = setInterval(() => this.check().catch(() => {}), this.#options.pollMs);
      this.#timer.unref();
    }
  }

  /** Reloads when the files changed since the last check (one check at a time). */
  check(): Promise<void> {
    if (this.#running !== undefined) {
      this.#again = true;
      return this.#running;
    }
    const run = (async () => {
      do {
        this.#again = false;
        await this.#reload();
      } while (this.#again);
    })().finally(() => {
      this.#running = undefined;
    });
    this.#running = run;
    return run;
  }

  stop(): void {
    this.#watcher?.close();
    clearInterval(this.#timer);
    clearTimeout(this.#settle);
  }

  async #reload(): Promise<void> {
    let rules: RuleSet;
    let digest: string;
    try {
      const texts = await readRuleTexts(this.#options.path);
      digest = texts.digest;
      if (digest === this.#digest) return;
      this.#digest = digest;
      rules = buildRuleSet(texts, this.#options.merge, this.#options.policies);
    } catch (caught) {
      // Never a silent failure: whatever the files threw is reported as theirs.
      const error =
        caught instanceof RuleFileError
          ? caught
          : new RuleFileError(this.#options.path, '(file)', `cannot be loaded: ${String(caught)}`);
      if (this.#lastError?.message === error.message) return;
      this.#lastError = error;
      this.#options.onReload({ ok: false, error });
      return;
    }
    this.#current = rules;
    this.#lastError = undefined;
    this.#options.onReload({ ok: true, rules });
  }
}
