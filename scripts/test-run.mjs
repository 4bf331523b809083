// The test runner `scripts/test.mjs` starts: Node's test runner on the files named in
// SLUICE_TEST_FILES (a JSON array), in that order. Not `node --test <files>`: Node 20's CLI
// sorts the files it is given by path, which ran the slow group (soak, sentinel, serve-*, …)
// last instead of first; `run({ files })` starts them in the order given. The output is
// the CLI's: its default reporter (spec on a terminal, TAP otherwise) on stdout.
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { inspect } from 'node:util';

const files = JSON.parse(process.env.SLUICE_TEST_FILES ?? '[]');
const stream = run({
  files,
  concurrency: Number(process.env.SLUICE_TEST_CONCURRENCY ?? 4),
  timeout: Number(process.env.SLUICE_TEST_TIMEOUT_MS ?? 300_000),
});
const failures = [];
stream.on('test:fail', (data) => {
  if (data.todo) return;
  process.exitCode = 1;
  failures.push(failureLine(data));
});
const report = process.stdout.isTTY ? stream.compose(new spec()) : stream.compose(tap);
report.pipe(process.stdout);
report.once('end', () => {
  // The failures again, last, where the tail of a long log (a CI page) shows them: TAP names
  // them only where they happened, among some thousands of lines (spec lists them itself).
  const lines = failures.filter((line) => line !== null);
  if (lines.length > 0 && !process.stdout.isTTY) {
    process.stdout.write(`# failed: ${lines.length}\n${lines.map((l) => `#   ${l}\n`).join('')}`);
  }
  // Every file has a verdict now; a file's process that outlived the runner's SIGTERM (a file
  // past its timeout) would still hold this one open, and with it the suite. So this process
  // ends (a timer that holds nothing open itself), and scripts/test-guard.mjs names and kills
  // what is left.
  setTimeout(() => process.exit(), 1_000).unref();
});

/**
 * One failure in a line: the file (below test/), the test's name and the first line of its
 * error (an assertion's generated message: its actual and expected values instead, whose diff
 * spans lines); null for a suite that failed only because a test in it did (that test has a
 * line).
 */
function failureLine(data) {
  const error = data.details?.error;
  if (error?.failureType === 'subtestsFailed') return null;
  const cause = error?.cause ?? error;
  let message =
    String(cause?.message ?? cause ?? 'failed')
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? 'failed';
  if (cause?.code === 'ERR_ASSERTION' && cause.generatedMessage) {
    const brief = (value) => inspect(value, { breakLength: Number.POSITIVE_INFINITY, depth: 3 });
    message = `${cause.operator}: actual ${brief(cause.actual)}, expected ${brief(cause.expected)}`;
  }
  const file = data.file ? data.file.replace(/^.*?\/\.?test\//, '') : '?';
  return `${file} › ${data.name}: ${message.slice(0, 400)}`;
}
