/**
 * How a test runs one of the repository's TypeScript modules (a fixture, a worker) as a Node
 * process: its compiled `.js` with plain Node when the tests run compiled (`npm test`, see
 * scripts/test.mjs), else the `.ts` itself through tsx (a test file run on its own).
 */
import { fileURLToPath } from 'node:url';

/** True when this module runs compiled (from `.test/`), not through tsx. */
export const COMPILED = import.meta.url.endsWith('.js');

/** The arguments of `spawn(process.execPath, …)` that run the module at `url` (a `.ts` URL). */
export function nodeScript(url: URL): string[] {
  const path = fileURLToPath(url);
  return COMPILED ? [path.replace(/\.ts$/, '.js')] : ['--import', 'tsx', path];
}
