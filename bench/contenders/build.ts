/**
 * Which build of sluice the sluice contenders measure: `dist/`, the one `npm run build` makes
 * and `npm install sluice` gives (the default; `npm run bench` builds it first), or the
 * source under tsx (`SLUICE_BENCH_BUILD=src`: no build needed, but every closure then goes
 * through tsx's `__name` helper, which the published build does not have — a few per cent of
 * a decision's JavaScript, bench/PROFILE.md). The other contenders run their published
 * packages, so `dist/` is the like-for-like comparison.
 */
import { statSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** `dist` or `src`. */
export const SLUICE_BUILD: 'dist' | 'src' =
  process.env.SLUICE_BENCH_BUILD === 'src' ? 'src' : 'dist';

const root = new URL('../../', import.meta.url);

/**
 * A module of the measured build, by its path under `src/` without extension (`index`,
 * `redis/node-redis/connect`). Typed by the caller with the source module's type.
 */
export function sluiceModule<T>(path: string): Promise<T> {
  return import(
    new URL(`${SLUICE_BUILD}/${path}.${SLUICE_BUILD === 'src' ? 'ts' : 'js'}`, root).href
  );
}

/**
 * Throws when the measured build is `dist/` and it is missing or older than a file of
 * `src/` (a bench of a stale build would report what the sources no longer do).
 */
export async function assertBuildFresh(): Promise<void> {
  if (SLUICE_BUILD === 'src') return;
  const built = new URL('dist/index.js', root);
  let builtAt: number;
  try {
    builtAt = statSync(built).mtimeMs;
  } catch {
    throw new Error('dist/ is missing: run `npm run build` (`npm run bench` does)');
  }
  const src = fileURLToPath(new URL('src/', root));
  for (const entry of await readdir(src, { recursive: true })) {
    const modifiedAt = statSync(`${src}/${entry}`).mtimeMs;
    if (modifiedAt > builtAt) {
      throw new Error(
        `dist/ is older than src/${entry}: run \`npm run build\` (\`npm run bench\` does), or measure the source with SLUICE_BENCH_BUILD=src`,
      );
    }
  }
}
