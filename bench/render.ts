/**
 * Renders RESULTS.md again from a results.json written by run.ts, without running anything:
 * `node --import tsx bench/render.ts [dir]` (default bench/). For when the report's text
 * (explanations, layout) changed after a run.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { type BenchResults, renderMarkdown } from './report.js';

const dir = resolve(process.argv[2] ?? 'bench');
const results = JSON.parse(readFileSync(`${dir}/results.json`, 'utf8')) as BenchResults;
writeFileSync(`${dir}/RESULTS.md`, renderMarkdown(results));
process.stderr.write(`wrote ${dir}/RESULTS.md\n`);
