// Copies what the compiled modules read at run time but tsc does not emit:
// - every Lua script and .proto file from src/ to the same place under dist/, next to the
//   module that loads it;
// - the demo's policy file, examples/demo-policies.json, to dist/demo/, so that `sluice demo`
//   runs from an installed package (examples/ is not shipped).
import { cp, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const entries = await readdir(join(root, 'src'), { recursive: true });
for (const entry of entries.filter((name) => name.endsWith('.lua') || name.endsWith('.proto'))) {
  await cp(join(root, 'src', entry), join(root, 'dist', entry));
}
await cp(
  join(root, 'examples', 'demo-policies.json'),
  join(root, 'dist', 'demo', 'demo-policies.json'),
);
