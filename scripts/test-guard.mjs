// The suite's guard: `scripts/test.mjs` runs the compiler and the test runner through it, so
// that the suite always ends, and ends with nothing of its own left running.
//
// Node's test runner ends a test file that outlives its timeout with one SIGTERM and goes on;
// a file that survives it (a SIGTERM listener that throws — the runner's harness catches the
// exception — or an event loop blocked in a synchronous call) keeps the runner's process, and
// so the suite, running for ever. A CI run once waited out its 90 minutes that way. Here:
// - the command runs in a process group of its own, which every test file, worker and
//   redis-server of the suite joins; each also inherits a token of this run in its
//   environment (SLUICE_SUITE_RUN), which finds one that left the group (a detached child);
// - the whole run has a deadline: past it, what still runs is named (the test files first) and
//   ended (SIGTERM, then SIGKILL);
// - when the command ends, whatever of the suite still runs is named and killed, and the run
//   fails: a test left it behind;
// - SIGINT, SIGTERM and SIGHUP to this process end the suite's processes first, then this
//   process, with 128 + the signal's number.
// Only the suite's processes are ever signalled: its group, and the pids that carry its token.
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** Signals that end the guard, and with it the suite's processes; their numbers. */
const ENDING = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 };

/** The longest delay a Node timer takes (about 24.8 days); longer ones fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const HAS_PROC = existsSync('/proc/self/stat');

/**
 * The live processes (not zombies) of process group `pgid`, and, where /proc is readable,
 * those whose environment holds `marker` (`NAME=value`), in or out of the group.
 * @param {number} pgid
 * @param {string} [marker]
 * @returns {{ pid: number, command: string }[]}
 */
export function suiteProcesses(pgid, marker) {
  if (!HAS_PROC) return membersFromPs(pgid);
  const found = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone between the listing and the read
    }
    // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z') continue;
    if (Number(fields[2]) !== pgid && !hasMarker(name, marker)) continue;
    let command = '';
    try {
      command = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {}
    found.push({ pid: Number(name), command });
  }
  return found;
}

function hasMarker(pid, marker) {
  if (marker === undefined) return false;
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(marker);
  } catch {
    return false; // gone, or not ours to read
  }
}

/** Without /proc (macOS): the group's members, from `ps`. */
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

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function describe(processes) {
  return processes.map(({ pid, command }) => `  ${pid} ${command}`).join('\n');
}

/**
 * Runs `node <args…>` in a process group of its own and resolves to the exit code the run
 * should have: the command's own, or 1 when it ran past `deadlineMs` or left processes
 * running. A signal to this process ends the command's processes, then this process.
 * @param {{ args: string[], env: NodeJS.ProcessEnv, cwd: string, deadlineMs: number,
 *   what?: string, graceMs?: number, settleMs?: number,
 *   stdio?: import('node:child_process').StdioOptions, log?: (line: string) => void }} options
 *   `deadlineMs`: for the whole run, a whole number above 0; `what`: the command, as the log
 *   names it ("the test runner"); `graceMs`: from SIGTERM to SIGKILL (5 s); `settleMs`: how
 *   long processes may take to end after the command did before they count as left behind
 *   (3 s); `stdio`: the command's (inherited).
 * @returns {Promise<number>}
 * @throws {RangeError} when `deadlineMs` is not a whole number above 0.
 */
export async function runGuarded({
  args,
  env,
  cwd,
  deadlineMs,
  what = 'the test runner',
  graceMs = 5_000,
  settleMs = 3_000,
  stdio = 'inherit',
  log = (line) => console.error(line),
}) {
  if (!Number.isSafeInteger(deadlineMs) || deadlineMs <= 0) {
    throw new RangeError(`deadlineMs: expected a whole number of ms above 0, got ${deadlineMs}`);
  }
  const marker = `SLUICE_SUITE_RUN=${randomUUID()}`;
  const [markerName, markerValue] = marker.split('=');
  // detached: the command leads a new process group (and session), which its children join.
  const command = spawn(process.execPath, args, {
    cwd,
    env: { ...env, [markerName]: markerValue },
    stdio,
    detached: true,
  });
  const pgid = command.pid;
  if (pgid === undefined) {
    await new Promise((resolve) => command.once('error', resolve));
    log(`test guard: ${what} did not start`);
    return 1;
  }
  const exited = new Promise((resolve) =>
    command.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const running = () => suiteProcesses(pgid, marker);

  /** Signals every process of the run; false once none is left. */
  const signalAll = (signal) => {
    let any = false;
    try {
      process.kill(-pgid, signal);
      any = true;
    } catch {} // ESRCH: the group is empty
    for (const { pid } of running()) {
      try {
        process.kill(pid, signal);
        any = true;
      } catch {}
    }
    return any;
  };
  /** Waits up to `ms` for every process of the run to end; true if they did. */
  const ended = async (ms) => {
    const until = Date.now() + ms;
    for (;;) {
      if (running().length === 0) return true;
      if (Date.now() >= until) return false;
      await sleep(50);
    }
  };
  /** SIGTERM to every process of the run, then SIGKILL to what is left after `graceMs`. */
  const endAll = async () => {
    if (!signalAll('SIGTERM')) return;
    if (await ended(graceMs)) return;
    signalAll('SIGKILL');
    await ended(5_000);
  };

  /** Set by a signal: ends the run's processes, then this process (128 + its number). */
  let ending;
  const onSignal = (signal) => {
    ending ??= (async () => {
      log(`test guard: ${signal}: ending ${what} and what it started`);
      await endAll();
      process.exit(128 + ENDING[signal]);
    })();
  };
  for (const signal of Object.keys(ENDING)) process.on(signal, onSignal);

  // A deadline longer than a Node timer takes is waited for in steps.
  const deadline = Date.now() + deadlineMs;
  let timer;
  const overdue = new Promise((resolve) => {
    const arm = () => {
      const left = deadline - Date.now();
      timer = left <= 0 ? undefined : setTimeout(arm, Math.min(left, MAX_TIMER_MS));
      if (timer === undefined) resolve('overdue');
    };
    arm();
  });
  const outcome = await Promise.race([exited, overdue]);
  clearTimeout(timer);

  let status;
  if (ending !== undefined) {
    status = 1; // the signal's handler exits
  } else if (outcome === 'overdue') {
    // The test files first: the ones to look at.
    const left = running().sort(
      (a, b) =>
        Number(/\.test\.[cm]?js\b/.test(b.command)) - Number(/\.test\.[cm]?js\b/.test(a.command)),
    );
    log(
      `test guard: ${what} ran past its ${Math.round(deadlineMs / 1000)} s; still running:\n${describe(left)}`,
    );
    await endAll();
    status = 1;
  } else {
    const { code, signal } = outcome;
    status = code ?? (signal ? 1 : 0);
    if (!(await ended(settleMs))) {
      log(
        `test guard: left running after ${what} ended (killed now; a test did not stop them):\n` +
          describe(running()),
      );
      await endAll();
      status = 1;
    }
  }
  // A signal met on the way: its handler ends this process, with its own code.
  if (ending !== undefined) await ending;
  for (const signal of Object.keys(ENDING)) process.off(signal, onSignal);
  return status;
}
