// Builds the API reference (docs/api/) from the TSDoc of every entry point with TypeDoc,
// warnings as errors (typedoc.json). TypeDoc needs TypeScript's JavaScript API, which the
// TypeScript 7 compiler this project builds with does not have: it is installed with
// TypeScript 6 in the workspace tools/api-docs, and run from there.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tools = createRequire(join(root, 'tools/api-docs/package.json'));
let typedoc;
try {
  typedoc = dirname(tools.resolve('typedoc/package.json'));
} catch {
  console.error('docs:api: TypeDoc is not installed; run `npm ci` (it installs tools/api-docs).');
  process.exit(2);
}
const bin = join(typedoc, 'bin', 'typedoc');
const run = spawnSync(
  process.execPath,
  [bin, '--options', 'typedoc.json', ...process.argv.slice(2)],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
if (run.error !== undefined) console.error(`docs:api: TypeDoc did not run: ${run.error.message}`);
if (run.signal !== null) console.error(`docs:api: TypeDoc was stopped by ${run.signal}`);
process.exit(run.status ?? 1);
