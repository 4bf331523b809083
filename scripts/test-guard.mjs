// The suite's guard: `scripts/test.mjs` runs the test runner through it, so that the suite
// always ends, and ends with nothing of its own left running.
//
// Node's test runner ends a test file that outlives its timeout with one SIGTERM and goes on;
// a file that survives it (a SIGTERM listener that throws — the runner's harness catches the
// exception — or an event loop blocked in a synchronous call) keeps the runner's process, and
// so the suite, running for ever. A CI run once waited out its 90 minutes that way. Here:
// - the runner runs in a process group of its own, which every test file, worker and
//   redis-server of the suite joins (none of them detaches);
// - the whole suite has a deadline: past it, the test files still running are named, and the
//   group is ended (SIGTERM, then SIGKILL);
// - when the runner ends, whatever of the group still runs is named and killed, and the suite
//   fails: a test left it behind;
// - SIGINT, SIGTERM and SIGHUP to this process end the group first.
// Only that group is ever signalled: processes the suite started, by their group id.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** Signals that end the guard, and with it the group. */
const ENDING = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * The live processes of process group `pgid` (not zombies), read from /proc, or from `ps`
 * where there is no /proc (macOS).
 * @param {number} pgid
 * @returns {{ pid: number, command: string }[]}
 */
export function groupMembers(pgid) {
  if (!existsSync('/proc/self/stat')) return membersFromPs(pgid);
  const members = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone between the listing and the read
    }
    // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || Number(fields[2]) !== pgid) continue;
    let command = '';
    try {
      command = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {}
    members.push({ pid: Number(name), command });
  }
  return members;
}

function membersFromPs(pgid) {
  const out = execFileSync('ps', ['-A', '-o', 'pid=,pgid=,stat=,command='], { encoding: 'utf8' });
  const members = [];
  for (const line of out.split('\n')) {
    const match = /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    if (match === null || Number(match[2]) !== pgid || match[3].startsWith('Z')) continue;
    members.push({ pid: Number(match[1]), command: match[4] });
  }
  return members;
}

/** Signals the whole group; false once no process of it is left. */
function signalGroup(pgid, signal) {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false; // ESRCH: the group is empty
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits up to `ms` for the group to empty; true if it did. */
async function emptied(pgid, ms) {
  const until = Date.now() + ms;
  for (;;) {
    if (groupMembers(pgid).length === 0) return true;
    if (Date.now() >= until) return false;
    await sleep(50);
  }
}

/** SIGTERM to the group, then SIGKILL to what is left after `graceMs`. */
async function endGroup(pgid, graceMs) {
  if (!signalGroup(pgid, 'SIGTERM')) return;
  if (await emptied(pgid, graceMs)) return;
  signalGroup(pgid, 'SIGKILL');
  await emptied(pgid, 5_000);
}

function describe(members) {
  return members.map(({ pid, command }) => `  ${pid} ${command}`).join('\n');
}

/**
 * Runs `node <args…>` in a process group of its own, with stdio inherited, and resolves to
 * the exit code the suite should have: the runner's own, or 1 when the suite ran past
 * `suiteMs` or left processes running.
 * @param {{ args: string[], env: NodeJS.ProcessEnv, cwd: string, suiteMs: number,
 *   graceMs?: number, settleMs?: number, stdio?: import('node:child_process').StdioOptions,
 *   log?: (line: string) => void }} options
 *   `graceMs`: from SIGTERM to SIGKILL (5 s); `settleMs`: how long processes of the group
 *   may take to end after the runner did before they count as left behind (3 s); `stdio`:
 *   the runner's (inherited).
 * @returns {Promise<number>}
 */
export async function runGuarded({
  args,
  env,
  cwd,
  suiteMs,
  graceMs = 5_000,
  settleMs = 3_000,
  stdio = 'inherit',
  log = (line) => console.error(line),
}) {
  // detached: the runner leads a new process group (and session), which its children join.
  const runner = spawn(process.execPath, args, { cwd, env, stdio, detached: true });
  const pgid = runner.pid;
  if (pgid === undefined) {
    await new Promise((resolve) => runner.once('error', resolve));
    log('test guard: the test runner did not start');
    return 1;
  }
  const exited = new Promise((resolve) =>
    runner.once('exit', (code, signal) => resolve({ code, signal })),
  );

  /** Set by a signal: ends the group, then this process (with 128 + the signal's number). */
  let ending;
  const onSignal = (signal) => {
    ending ??= (async () => {
      log(`test guard: ${signal}: ending the suite's processes`);
      await endGroup(pgid, graceMs);
      process.exit(128 + (signal === 'SIGINT' ? 2 : signal === 'SIGHUP' ? 1 : 15));
    })();
  };
  for (const signal of ENDING) process.on(signal, onSignal);

  let timer;
  const overdue = new Promise((resolve) => {
    timer = setTimeout(() => resolve('overdue'), suiteMs);
  });
  const outcome = await Promise.race([exited, overdue]);
  clearTimeout(timer);
  if (ending !== undefined) await ending; // the runner ended by the signal: exits from there

  let status;
  if (outcome === 'overdue') {
    const running = groupMembers(pgid);
    const files = running.filter(({ command }) => /\.test\.[cm]?js\b/.test(command));
    log(
      `test guard: the suite ran past its ${Math.round(suiteMs / 1000)} s; still running:\n` +
        describe(files.length > 0 ? files : running),
    );
    await endGroup(pgid, graceMs);
    status = 1;
  } else {
    const { code, signal } = outcome;
    status = code ?? (signal ? 1 : 0);
    if (!(await emptied(pgid, settleMs))) {
      log(
        'test guard: left running after the test runner ended (killed now; a test did not stop them):\n' +
          describe(groupMembers(pgid)),
      );
      await endGroup(pgid, graceMs);
      status = 1;
    }
  }
  for (const signal of ENDING) process.off(signal, onSignal);
  return status;
}
