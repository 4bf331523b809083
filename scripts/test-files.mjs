// What `node scripts/test.mjs [filter…]` runs, and the settings it reads from the
// environment: checked before anything is built, so that a typo fails at once.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The slow group, in the order they start: each holds the suite open for a while (a soak, an outage,
 * other processes, a packed install, topologies), so they start first and the short files
 * fill the gaps around them.
 */
export const SLOW = [
  // Long and mostly waiting (outages held, failovers, a timed soak) …
  'soak',
  'outage',
  'failover',
  // … with the files that spawn many processes (a packed install, tsc, clusters) spread
  // among files that wait, so that no more than two or three of them share the cores.
  'cli',
  'conformance',
  'package',
  'stall-watchdog',
  'sentinel',
  'readme-examples',
  'serve-bounds',
  'dead-connection',
  'cluster',
  'model',
  'script-time',
  'serve-cluster',
  'serve-sentinel',
  'fast-path',
  'race',
  'fixed-window',
  'demo',
  'http-node',
  'processes',
  'take-all-processes',
  'concurrency-processes',
  // 10–35 s each in a run of the whole suite (SLUICE_TEST_TIMINGS): not left for the end.
  'priced',
  'serve-processes',
  'serve-reload',
  'nextjs',
  'sliding-window-log-weighted',
  'serve-trial',
  'http-settle',
  'fuzz',
];

/**
 * The test files to run, as paths below the tests' folder with a `.js` ending
 * (`unit/key.test.js`, as compiled into `.test/`), the slow group first. A filter matches a
 * file whose path below the folder contains it (`node scripts/test.mjs outage unit/key`).
 * @param {string} testDir the sources' folder, `test/`
 * @param {string[]} filters none: every file
 * @returns {string[]}
 * @throws {Error} when filters are given and no file matches them.
 */
export function chooseFiles(testDir, filters) {
  const all = ['unit', 'integration'].flatMap((group) =>
    readdirSync(join(testDir, group))
      .filter((name) => name.endsWith('.test.ts'))
      .map((name) => `${group}/${name.replace(/\.ts$/, '.js')}`),
  );
  const chosen =
    filters.length === 0 ? all : all.filter((file) => filters.some((x) => file.includes(x)));
  if (chosen.length === 0) {
    throw new Error(`no test file matches ${filters.map((x) => `"${x}"`).join(', ')}`);
  }
  const rank = (file) => {
    const i = SLOW.indexOf(file.split('/').pop().replace('.test.js', ''));
    return i < 0 ? SLOW.length : i;
  };
  return chosen.sort((a, b) => rank(a) - rank(b));
}

/**
 * A whole number of seconds from `env[name]`, `fallback` when it is unset.
 * @param {NodeJS.ProcessEnv} env
 * @param {string} name
 * @param {number} fallback
 * @param {number} min the least value accepted
 * @returns {number}
 * @throws {Error} naming the variable, when its value is not a whole number from `min` to
 *   1,000,000.
 */
export function wholeSeconds(env, name, fallback, min) {
  const text = env[name];
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > 1_000_000) {
    throw new Error(
      `${name}: expected a whole number of seconds from ${min} to 1000000, got "${text}"`,
    );
  }
  return Number(text);
}
