// The test runner `scripts/test.mjs` starts: Node's test runner on the files named in
// SLUICE_TEST_FILES (a JSON array), in that order. Not `node --test <files>`: Node 20's CLI
// sorts the files it is given by path, which ran the slow group (soak, sentinel, serve-*, …)
// last instead of first; `run({ files })` starts them in the order given. The output is
// the CLI's: its default reporter (spec on a terminal, TAP otherwise) on stdout.
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';

const files = JSON.parse(process.env.SLUICE_TEST_FILES ?? '[]');
const stream = run({
  files,
  concurrency: Number(process.env.SLUICE_TEST_CONCURRENCY ?? 4),
  timeout: Number(process.env.SLUICE_TEST_TIMEOUT_MS ?? 300_000),
});
stream.on('test:fail', (data) => {
  if (!data.todo) process.exitCode = 1;
});
const report = process.stdout.isTTY ? stream.compose(new spec()) : stream.compose(tap);
report.pipe(process.stdout);
// Once the report has ended, every file has a verdict; a file's process that outlived the
// runner's SIGTERM (a file past its timeout) would still hold this one open, and with it the
// suite. So this process ends then (a timer that holds nothing open itself), and
// scripts/test-guard.mjs names and kills what is left.
report.once('end', () => setTimeout(() => process.exit(), 1_000).unref());
