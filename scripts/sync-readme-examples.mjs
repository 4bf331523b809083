// Copies each examples/<file> into the code block that follows its
// `<!-- example: examples/<file> -->` marker, in README.md and every page under docs/ (the
// generated docs/api/ excepted). test/integration/readme-examples.test.ts checks they agree.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

const root = new URL('../', import.meta.url);

/** README.md and docs/**\/*.md, relative to the root. */
function pages() {
  const found = ['README.md'];
  const walk = (dir) => {
    for (const entry of readdirSync(new URL(`${dir}/`, root), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory() && path !== 'docs/api') walk(path);
      else if (entry.isFile() && entry.name.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  return found;
}

// The marker, the opening fence, the block's lines, the closing fence at a line's start.
const MARKED = /(<!-- example: (examples\/\S+) -->\n(`{3,})[^\n]*\n)[\s\S]*?^(\3[ \t]*)$/gm;
const changed = [];
for (const page of pages()) {
  const url = new URL(page, root);
  const text = readFileSync(url, 'utf8');
  const synced = text.replace(MARKED, (_, open, file, _fence, close) => {
    const content = readFileSync(new URL(file, root), 'utf8');
    return open + content + (content.endsWith('\n') ? '' : '\n') + close;
  });
  if (synced !== text) {
    writeFileSync(url, synced);
    changed.push(page);
  }
}
console.log(changed.length === 0 ? 'examples already in sync' : `synced: ${changed.join(', ')}`);
