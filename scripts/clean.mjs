// Deletes dist/, so that a pack (prepack) ships only what the build that follows (prepare)
// emits, never a module left over from a source file since deleted or renamed.
import { rm } from 'node:fs/promises';

await rm(new URL('../dist/', import.meta.url), { recursive: true, force: true });
