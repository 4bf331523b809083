/**
 * The documentation as the docs tests read it: README.md and every page under docs/ (the
 * generated API reference, docs/api/, excepted), their fenced code blocks and the
 * `<!-- example: examples/<file> -->` marker that names the file a block shows.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root directory. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Generated into docs/ by `npm run docs:api`, not written by hand. */
export const GENERATED = 'docs/api';

/** README.md and docs/**\/*.md, as paths relative to the root (`docs/errors.md`). */
export function docFiles(): string[] {
  const pages: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (path !== GENERATED) walk(path);
      } else if (entry.name.endsWith('.md')) pages.push(path);
    }
  };
  walk('docs');
  return ['README.md', ...pages.sort()];
}

/** One fenced code block of a page. */
export interface CodeBlock {
  readonly page: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The info string's first word (`ts`, `json`, `text`…), `''` when there is none. */
  readonly lang: string;
  /** The text between the fences, each line with its newline. */
  readonly text: string;
  /** The file the marker right above the fence names (`examples/use.ts`), if any. */
  readonly example: string | undefined;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/;
const MARKER = /^<!-- example: (examples\/\S+) -->$/;

/** The fenced code blocks of a page's text, in order. */
export function codeBlocks(page: string, text = readPage(page)): CodeBlock[] {
  const lines = text.split('\n');
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i] as string);
    if (open === null) continue;
    const fence = open[2] as string;
    let end = i + 1;
    while (end < lines.length && !(lines[end] as string).trim().startsWith(fence)) end++;
    const marker = MARKER.exec(lines[i - 1] ?? '');
    blocks.push({
      page,
      line: i + 1,
      lang: open[3] as string,
      text: lines
        .slice(i + 1, end)
        .map((line) => `${line}\n`)
        .join(''),
      example: marker?.[1],
    });
    i = end;
  }
  return blocks;
}

/** A page's text. */
export function readPage(page: string): string {
  return readFileSync(join(ROOT, page), 'utf8');
}

/** A path relative to the root, with forward slashes. */
export function fromRoot(path: string): string {
  return relative(ROOT, path).split('\\').join('/');
}
