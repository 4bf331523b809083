// Copies every Lua script from src/ to the same place under dist/, next to the compiled
// module that loads it (tsc copies only TypeScript output).
import { cp, readdir } from 'node:fs/promises';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const entries = await readdir(join(root, 'src'), { recursive: true });
for (const entry of entries.filter((name) => name.endsWith('.lua'))) {
  await cp(join(root, 'src', entry), join(root, 'dist', entry));
}
