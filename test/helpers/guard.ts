/**
 * scripts/test-guard.mjs on the test file test/fixtures/runner/waits.ts (a file that never
 * ends), for test/unit/test-guard.test.ts and its fixture test/fixtures/runner/guarded.ts.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { COMPILED, nodeScript } from './node-script.js';

interface Guard {
  runGuarded(options: {
    args: string[];
    env: NodeJS.ProcessEnv;
    cwd: string;
    deadlineMs: number;
    graceMs?: number;
    settleMs?: number;
    stdio?: 'ignore';
    log?: (line: string) => void;
  }): Promise<number>;
}

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Runs scripts/test-run.mjs on `waits` through the guard, the runner's output discarded; the
 * guard's status. `pidsFile`: where `waits` writes its pid and its grandchild's; `survive`:
 * whether it outlives the runner's SIGTERM; `detach`: whether its grandchild leaves the
 * process group while the test passes.
 */
export async function guardWaits(options: {
  pidsFile: string;
  survive: boolean;
  detach?: boolean;
  fileTimeoutMs: number;
  deadlineMs: number;
  settleMs?: number;
  log?: (line: string) => void;
}): Promise<number> {
  const guard = (await import(
    new URL('../../scripts/test-guard.mjs', import.meta.url).href
  )) as Guard;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    SLUICE_TEST_FILES: JSON.stringify([
      nodeScript(new URL('../fixtures/runner/waits.ts', import.meta.url)).at(-1),
    ]),
    SLUICE_TEST_TIMEOUT_MS: String(options.fileTimeoutMs),
    SLUICE_GUARD_PIDS: options.pidsFile,
    SLUICE_GUARD_SURVIVE: options.survive ? '1' : '0',
    SLUICE_GUARD_DETACH: options.detach ? '1' : '0',
  };
  // Not a test file's own runner context: the runner would report to it as its child.
  delete env.NODE_TEST_CONTEXT;
  return guard.runGuarded({
    // The runner passes its own flags (tsx's, when the tests run uncompiled) to the file.
    args: [...(COMPILED ? [] : ['--import', 'tsx']), join(root, 'scripts/test-run.mjs')],
    cwd: root,
    env,
    deadlineMs: options.deadlineMs,
    graceMs: 1_000,
    ...(options.settleMs === undefined ? {} : { settleMs: options.settleMs }),
    stdio: 'ignore',
    ...(options.log === undefined ? {} : { log: options.log }),
  });
}
