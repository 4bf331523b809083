/**
 * Whether a process still runs, for tests that check what a signal or a clean-up left behind.
 */
import { readFileSync } from 'node:fs';

/**
 * True while the process with this pid runs: it exists and is not a zombie (one killed and not
 * yet reaped by whoever inherited it, which on a busy machine may take a while).
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false; // gone between the two looks
  }
}
