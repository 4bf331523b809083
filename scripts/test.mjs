// `npm test`'s runner: the suite compiled once and run by Node's test runner, test files in
// parallel (each already has a private Redis), the slow group first.
//
// Why compiled: a test file run through tsx costs about half a second of CPU to start, and
// the suite starts more than a hundred Node processes (test files, workers, fixtures): on a
// machine of two cores that is a large share of the run. `tsc -p tsconfig.test.json` emits the
// tests (and the bench modules a test uses); their imports of the public API (`sluice`,
// `sluice/express`, …) resolve through the package's own `exports` to `dist/`, as a user's
// do, and their imports of internals (`../../src/…`) are pointed at the same build, so that
// one copy of each module runs. The compiled tests live in `.test/`, at the same depth as
// `test/`, so that every path a test computes from `import.meta.url` finds the same files.
// `npm test` builds `dist/` first.
//
// node scripts/test.mjs [file filter…]   (e.g. `node scripts/test.mjs outage cli`)
import { cpSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chooseFiles, wholeSeconds } from './test-files.mjs';
import { runGuarded } from './test-guard.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const build = join(root, '.test-build');
const out = join(root, '.test');

/**
 * Where a compiled file's relative import leads: the module it names in the sources, mapped
 * to what runs — `src/` to `dist/` (the build), `test/` to `.test/`, `bench/` to `.test/bench/`.
 */
function pointImports(file, source) {
  const text = readFileSync(file, 'utf8');
  const from = dirname(source);
  const pointed = text.replace(
    /((?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"]))(\.{1,2}\/[^'"]+)\2/g,
    (_whole, head, quote, specifier) => {
      const target = relative(root, join(from, specifier));
      const mapped = target.startsWith('src/')
        ? join(root, 'dist', target.slice(4))
        : target.startsWith('test/')
          ? join(out, target.slice(5))
          : target.startsWith('bench/')
            ? join(out, 'bench', target.slice(6))
            : join(root, target);
      let next = relative(dirname(file), mapped);
      if (!next.startsWith('.')) next = `./${next}`;
      return `${head}${next}${quote}`;
    },
  );
  if (pointed !== text) writeFileSync(file, pointed);
}

async function compile() {
  rmSync(build, { recursive: true, force: true });
  rmSync(out, { recursive: true, force: true });
  // Guarded too: a Ctrl-C while it compiles ends tsc (and the compiler it runs), not only this.
  const status = await runGuarded({
    args: [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.test.json'],
    cwd: root,
    env: process.env,
    deadlineMs: 600_000,
    what: 'tsc',
  });
  if (status !== 0) process.exit(status);
  renameSync(join(build, 'test'), out);
  renameSync(join(build, 'bench'), join(out, 'bench'));
  rmSync(build, { recursive: true, force: true });
  for (const entry of readdirSync(out, { recursive: true })) {
    if (!entry.endsWith('.js')) continue;
    const source = entry.startsWith('bench/')
      ? join(root, entry.replace(/\.js$/, '.ts'))
      : join(root, 'test', entry.replace(/\.js$/, '.ts'));
    pointImports(join(out, entry), source);
  }
  // What tsc does not emit: the package fixtures (type-checked in the installed app).
  cpSync(join(root, 'test/fixtures/package'), join(out, 'fixtures/package'), { recursive: true });
}

// Each test file may take 5 minutes (the longest, the model test, takes about 2 in a run of
// the whole suite on 2 cores, 15 s alone); a longer soak (`npm run test:soak`) gets its
// length and 2 more. The whole suite (about 6 minutes on 2 cores) may take 30, a soak's
// length more (SLUICE_SUITE_TIMEOUT_S to change it): past it, scripts/test-guard.mjs names
// the files still running and ends them. Checked, like the filters, before anything is built.
let soakMs, suiteMs, chosen;
try {
  soakMs = wholeSeconds(process.env, 'SLUICE_SOAK_SECONDS', 0, 0) * 1000;
  suiteMs = wholeSeconds(process.env, 'SLUICE_SUITE_TIMEOUT_S', 1800, 1) * 1000 + soakMs;
  chosen = chooseFiles(join(root, 'test'), process.argv.slice(2));
} catch (error) {
  console.error(error.message);
  process.exit(2);
}
const timeoutMs = Math.max(300_000, soakMs + 120_000);

await compile();
console.log(`running ${chosen.length} test files from ${relative(root, out)}/`);
// The files run by scripts/test-run.mjs (Node's test runner, in this order: see there),
// guarded by scripts/test-guard.mjs: a process group of its own, a deadline, nothing left over.
const status = await runGuarded({
  args: [
    // SLUICE_TEST_TIMINGS=<file.jsonl>: each test file's wall time appended there (see
    // scripts/test-timings.mjs); the output is the same.
    ...(process.env.SLUICE_TEST_TIMINGS
      ? ['--import', join(root, 'scripts/test-timings.mjs')]
      : []),
    join(root, 'scripts/test-run.mjs'),
  ],
  cwd: root,
  env: {
    ...process.env,
    SLUICE_TEST_COMPILED: '1',
    SLUICE_TEST_FILES: JSON.stringify(chosen.map((file) => join(out, file))),
    SLUICE_TEST_TIMEOUT_MS: String(timeoutMs),
  },
  deadlineMs: suiteMs,
});
process.exit(status);
