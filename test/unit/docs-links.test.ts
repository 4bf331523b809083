/**
 * Every relative link of README.md and docs/**\/*.md points at a file or folder of the
 * repository, and every `#anchor` into a Markdown page at one of its headings (as GitHub
 * makes their ids). Links into the generated API reference (docs/api/, built by
 * `npm run docs:api`) are not checked: it is not committed.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, it } from 'node:test';
import { docFiles, GENERATED, ROOT, readPage } from '../helpers/docs.js';

/** A page's text with its fenced code blocks and inline code spans blanked out. */
function prose(text: string): string {
  const lines = text.split('\n');
  let fence: string | undefined;
  return lines
    .map((line) => {
      const open = /^\s*(`{3,}|~{3,})/.exec(line);
      if (fence === undefined && open !== null) {
        fence = open[1] as string;
        return '';
      }
      if (fence !== undefined) {
        if (line.trim().startsWith(fence)) fence = undefined;
        return '';
      }
      return line.replace(/(`+)[^`]*?\1/g, '');
    })
    .join('\n');
}

/** The ids GitHub gives a page's headings (lowercased, punctuation dropped, spaces → `-`). */
function headingIds(page: string): Set<string> {
  const ids = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of readPage(page).split('\n')) {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence === undefined && open !== null) fence = open[1] as string;
    else if (fence !== undefined && line.trim().startsWith(fence)) fence = undefined;
    if (fence !== undefined || open !== null) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading === null) continue;
    const text = (heading[1] as string)
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1') // a link: its text
      .replace(/`/g, '');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    ids.add(count === 0 ? base : `${base}-${count}`);
  }
  return ids;
}

/** Every `[text](target)` of a page's prose. */
function links(page: string): string[] {
  const found: string[] = [];
  for (const match of prose(readPage(page)).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    found.push(match[1] as string);
  }
  return found;
}

describe('links between the docs', () => {
  const pages = docFiles();

  it('finds the pages and their links', () => {
    assert.ok(pages.includes('README.md') && pages.includes('docs/README.md'));
    assert.ok(pages.length > 10, pages.join(', '));
    assert.ok(links('docs/README.md').length > 10);
    assert.ok(headingIds('docs/errors.md').has('sluice_invalid_input'));
  });

  for (const page of pages) {
    it(`${page}: every relative link and anchor resolves`, () => {
      const broken: string[] = [];
      for (const target of links(page)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
        const hash = target.indexOf('#');
        const path = hash === -1 ? target : target.slice(0, hash);
        const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
        const file = path === '' ? page : normalize(join(dirname(page), decodeURIComponent(path)));
        if (file.split('\\').join('/').startsWith(`${GENERATED}/`)) continue;
        if (relative(ROOT, join(ROOT, file)).startsWith('..')) {
          broken.push(`${target}: outside the repository`);
          continue;
        }
        if (!existsSync(join(ROOT, file))) {
          broken.push(`${target}: no ${file}`);
          continue;
        }
        if (anchor !== undefined && file.endsWith('.md') && !headingIds(file).has(anchor)) {
          broken.push(`${target}: no heading #${anchor} in ${file}`);
        }
      }
      assert.deepEqual(broken, []);
    });
  }
});
