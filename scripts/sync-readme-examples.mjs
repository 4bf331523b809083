// Copies each examples/<file> into the README block that follows its
// `<!-- example: examples/<file> -->` marker. The README examples test checks they agree.
import { readFileSync, writeFileSync } from 'node:fs';

const readmeUrl = new URL('../README.md', import.meta.url);
const readme = readFileSync(readmeUrl, 'utf8');
const synced = readme.replace(
  /(<!-- example: (examples\/[^ ]+) -->\n```[a-z]*\n)[\s\S]*?(```\n)/g,
  (_, open, file, close) =>
    open + readFileSync(new URL(`../${file}`, import.meta.url), 'utf8') + close,
);
if (synced !== readme) writeFileSync(readmeUrl, synced);
console.log(synced === readme ? 'README examples already in sync' : 'README examples synced');
