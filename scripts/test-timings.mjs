// Opt-in per-file wall times for `node scripts/test.mjs` (SLUICE_TEST_TIMINGS=<file.jsonl>):
// preloaded (`--import`) into the runner, which passes it on to each test file's process; a
// test file's process appends one line {file, startMs, endMs, ms} to the file when it exits.
// The runner's own output is unchanged. Summarise with `node scripts/test-timings.mjs <file>`.
import { appendFileSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const out = process.env.SLUICE_TEST_TIMINGS;
const file = process.argv[1] ?? '';

if (out && file.endsWith('.test.js')) {
  const startMs = Date.now() - Math.round(process.uptime() * 1000);
  process.on('exit', () => {
    const endMs = Date.now();
    const name = file.split('/').slice(-2).join('/');
    appendFileSync(out, `${JSON.stringify({ file: name, startMs, endMs, ms: endMs - startMs })}\n`);
  });
} else if (
  import.meta.url === `file://${process.argv[1]}` ||
  fileURLToPath(import.meta.url) === file
) {
  const path = process.argv[2];
  if (!path) {
    console.error('usage: node scripts/test-timings.mjs <timings.jsonl> [top N]');
    process.exit(2);
  }
  const rows = readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  const first = Math.min(...rows.map((r) => r.startMs));
  const last = Math.max(...rows.map((r) => r.endMs));
  const top = Number(process.argv[3] ?? rows.length);
  const sorted = [...rows].sort((a, b) => b.ms - a.ms);
  for (const r of sorted.slice(0, top)) {
    const at = ((r.startMs - first) / 1000).toFixed(1);
    console.log(
      `${(r.ms / 1000).toFixed(1).padStart(7)} s  (started at ${at.padStart(6)} s)  ${r.file}`,
    );
  }
  const sum = rows.reduce((s, r) => s + r.ms, 0);
  console.log(
    `${rows.length} files, wall ${((last - first) / 1000).toFixed(1)} s, sum ${(sum / 1000).toFixed(1)} s`,
  );
}
