/**
 * Server-side counters, read by the parent around each measured span with one
 * `INFO cpu commandstats`: Redis CPU (used_cpu_sys + used_cpu_user) and command calls.
 * The INFO calls themselves (cmdstat_info) are left out of the totals.
 */

export interface RedisSnapshot {
  /** used_cpu_sys + used_cpu_user, in µs. */
  readonly cpuUs: number;
  /** Calls of every command but INFO, including commands called from Lua scripts. */
  readonly calls: number;
  /** Calls of EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL, FCALL_RO: top-level scripts. */
  readonly scriptCalls: number;
}

const SCRIPT_COMMANDS = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

/** Parses the text of `INFO cpu commandstats`. */
export function parseInfo(text: string): RedisSnapshot {
  let cpuSeconds = 0;
  let calls = 0;
  let scriptCalls = 0;
  for (const line of text.split('\r\n')) {
    const cpu = /^used_cpu_(sys|user):([\d.]+)$/.exec(line);
    if (cpu) {
      cpuSeconds += Number(cpu[2]);
      continue;
    }
    // cmdstat_<name>:calls=<n>,usec=…  (subcommands appear as cmdstat_script|load)
    const stat = /^cmdstat_([^:]+):calls=(\d+),/.exec(line);
    if (stat) {
      const name = stat[1] as string;
      const n = Number(stat[2]);
      if (name === 'info') continue;
      calls += n;
      if (SCRIPT_COMMANDS.has(name)) scriptCalls += n;
    }
  }
  return { cpuUs: cpuSeconds * 1e6, calls, scriptCalls };
}

/** `after − before`, field by field. */
export function diffSnapshots(before: RedisSnapshot, after: RedisSnapshot): RedisSnapshot {
  return {
    cpuUs: after.cpuUs - before.cpuUs,
    calls: after.calls - before.calls,
    scriptCalls: after.scriptCalls - before.scriptCalls,
  };
}
