/**
 * The suite's guard (scripts/test-guard.mjs): the suite ends, and leaves nothing running, even
 * when a test file outlives the test runner's SIGTERM. A CI run once waited out its 90 minutes
 * on such a file: the runner's process stayed open while the file's did.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { alive } from '../helpers/alive.js';
import { guardWaits } from '../helpers/guard.js';
import { COMPILED, nodeScript } from '../helpers/node-script.js';

/**
 * A file's timeout, or the run's deadline, that the fixture file meets only once it has
 * started and written its pids: ample for a Node process to start on a loaded machine.
 */
const FILE_STARTS_MS = 5_000;

const dir = mkdtempSync(join(tmpdir(), 'sluice-guard-'));
/** Every pid a fixture reported: whatever a failed assertion left running is killed after. */
const started: number[] = [];
after(() => {
  for (const pid of started) if (alive(pid)) process.kill(pid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/**
 * The guard on a file that outlives the runner's SIGTERM (or, `detach`, passes leaving a
 * detached grandchild): its status, log and the pids.
 */
async function guarded(name: string, fileTimeoutMs: number, deadlineMs: number, detach = false) {
  const pidsFile = join(dir, `${name}.json`);
  const log: string[] = [];
  const status = await guardWaits({
    pidsFile,
    survive: !detach,
    detach,
    fileTimeoutMs,
    deadlineMs,
    settleMs: 500,
    log: (line) => log.push(line),
  });
  const pids = JSON.parse(readFileSync(pidsFile, 'utf8')) as number[];
  started.push(...pids);
  return { status, log: log.join('\n'), pids };
}

describe('the test guard', () => {
  it('a file that survives the runner’s SIGTERM: the runner still ends, the file and its child are killed, the suite fails', async () => {
    const { status, log, pids } = await guarded('survives', FILE_STARTS_MS, 120_000);
    assert.equal(status, 1);
    // Ended because the runner ended (not by the suite's deadline), and said what it killed.
    assert.match(log, /left running after the test runner ended/, log);
    assert.doesNotMatch(log, /ran past/, log);
    assert.match(log, /waits\.js|waits\.ts/, log);
    assert.equal(pids.length, 2);
    assert.deepEqual(pids.filter(alive), [], 'the file and its grandchild are gone');
  });

  it('a SIGINT (Ctrl-C) to the guard ends the suite’s processes, then the guard with 130', async () => {
    const pidsFile = join(dir, 'sigint.json');
    const child = spawn(
      process.execPath,
      nodeScript(new URL('../fixtures/runner/guarded.ts', import.meta.url)),
      { env: { ...process.env, SLUICE_GUARD_PIDS: pidsFile }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    // 'close': its stderr read to the end.
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    try {
      for (let i = 0; i < 600 && !existsSync(pidsFile); i++) await sleep(50);
      await sleep(100); // the file is written in one call; let it be complete
      const pids = JSON.parse(readFileSync(pidsFile, 'utf8')) as number[];
      started.push(...pids);
      assert.deepEqual(pids.filter(alive), pids, 'the file and its grandchild run');
      child.kill('SIGINT');
      assert.equal(await exited, 130, stderr);
      assert.match(stderr, /SIGINT: ending the test runner and what it started/);
      assert.deepEqual(pids.filter(alive), [], 'the file and its grandchild are gone');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });

  it('a process that left the group (detached) is found by the run’s token, named and killed; the suite fails', async () => {
    const { status, log, pids } = await guarded('detached', 120_000, 120_000, true);
    assert.equal(status, 1);
    assert.match(log, /left running after the test runner ended/, log);
    assert.match(log, new RegExp(`\\b${pids[1]}\\b`), log);
    assert.deepEqual(pids.filter(alive), [], 'the detached grandchild is gone');
  });

  it('the suite’s deadline: the files still running are named and ended', async () => {
    const { status, log, pids } = await guarded('overdue', 120_000, FILE_STARTS_MS);
    assert.equal(status, 1);
    assert.match(log, /the test runner ran past its 5 s; still running:/, log);
    assert.match(log, /waits\.js|waits\.ts/, log);
    assert.deepEqual(pids.filter(alive), [], 'the file and its grandchild are gone');
  });
});

describe('the runner’s report (scripts/test-run.mjs)', () => {
  it('ends with a list of the failed tests (file, name, first line of the error), where a log’s tail shows them', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      SLUICE_TEST_FILES: JSON.stringify([
        nodeScript(new URL('../fixtures/runner/fails.ts', import.meta.url)).at(-1),
      ]),
    };
    delete env.NODE_TEST_CONTEXT;
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const child = spawn(
      process.execPath,
      [...(COMPILED ? [] : ['--import', 'tsx']), join(root, 'scripts/test-run.mjs')],
      { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    // 'close', not 'exit': the last of its report may be read after it exited.
    const status = await new Promise<number | null>((resolve) => child.once('close', resolve));
    assert.equal(status, 1, stdout);
    const tail = stdout.trimEnd().split('\n').slice(-4);
    const file = String.raw`^# {3}fixtures/runner/fails\.(js|ts) › `;
    assert.match(tail[0] ?? '', /^# failed: 3$/, stdout);
    assert.match(tail[1] ?? '', new RegExp(`${file}fails at the top: the sum is off$`));
    // A generated message's diff spans lines: the values instead.
    assert.match(
      tail[2] ?? '',
      new RegExp(
        `${file}differs deeply: deepStrictEqual: actual \\{ a: 1, b: \\[ 2 \\] \\}, expected \\{ a: 1, b: \\[ 3 \\] \\}$`,
      ),
    );
    assert.match(tail[3] ?? '', new RegExp(`${file}fails inside: inner failure$`));
  });
});

describe('what npm test runs (scripts/test-files.mjs)', () => {
  const testDir = fileURLToPath(new URL('../../test', import.meta.url));

  it('a filter matches a path below test/, the slow files first; one that matches nothing is an error', async () => {
    const { chooseFiles } = (await import(
      new URL('../../scripts/test-files.mjs', import.meta.url).href
    )) as { chooseFiles(dir: string, filters: string[]): string[] };
    assert.deepEqual(chooseFiles(testDir, ['unit/resp-parser', 'soak']), [
      'integration/soak.test.js',
      'unit/resp-parser.test.js',
    ]);
    // Not the checkout's own path, which every file's absolute path contains.
    const checkout = fileURLToPath(new URL('../../', import.meta.url));
    assert.throws(() => chooseFiles(testDir, [checkout]), /no test file matches/);
    assert.throws(() => chooseFiles(testDir, ['no-such-file']), /no test file matches/);
    assert.ok(chooseFiles(testDir, []).length > 100);
  });

  it('the seconds it reads from the environment are whole numbers in range, or an error naming the variable', async () => {
    const { wholeSeconds } = (await import(
      new URL('../../scripts/test-files.mjs', import.meta.url).href
    )) as { wholeSeconds(env: object, name: string, fallback: number, min: number): number };
    const read = (value: string | undefined) =>
      wholeSeconds({ SLUICE_SUITE_TIMEOUT_S: value }, 'SLUICE_SUITE_TIMEOUT_S', 1800, 1);
    assert.equal(read(undefined), 1800);
    assert.equal(read('600'), 600);
    for (const bad of ['', '0', '30m', '1e3', '-5', '2147484', ' 60']) {
      assert.throws(() => read(bad), /SLUICE_SUITE_TIMEOUT_S: expected a whole number/, bad);
    }
  });
});
