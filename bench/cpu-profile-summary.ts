/**
 * Self time of a `node --cpu-prof` profile by what it is spent on: `node --import tsx
 * bench/cpu-profile-summary.ts <file.cpuprofile> [top]`. Prints the share of the busy
 * (non-idle) time per category — garbage collection, socket writes, SHA-256, start-up
 * (module loading), the Redis client's code, sluice's own code by module — then the top
 * functions. Used for bench/PROFILE.md with profiles of bench/profile.ts.
 */
import { readFileSync } from 'node:fs';

interface Node {
  readonly id: number;
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
  };
}
interface Profile {
  readonly nodes: readonly Node[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const [file, topText = '25'] = process.argv.slice(2);
if (file === undefined) throw new Error('usage: cpu-profile-summary.ts <file.cpuprofile> [top]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
profile.samples.forEach((id, i) => {
  self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});

const short = (url: string) =>
  url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|dist|bench)\//, '$1/');

function category(node: Node): string {
  const { functionName: fn, url } = node.callFrame;
  if (fn === '(idle)') return 'idle';
  if (fn === '(garbage collector)') return 'garbage collection';
  if (
    /^(writeUtf8String|writev|writeBuffer|writeLatin1String)$/.test(fn) ||
    /stream_base_commons|streams\/writable|net\.js/.test(url)
  )
    return 'socket writes (the system call included)';
  if (/crypto/.test(url) || fn === 'hash') return 'SHA-256 (key hashing)';
  if (
    /node:internal\/(modules|deps|source_map|bootstrap)|\/tsx\//.test(url) ||
    /^(compile|wrapSafe|readFileUtf8|internalModuleStat)/.test(fn)
  )
    return 'start-up (module loading)';
  if (/@redis\/client|\/redis\//.test(url) && /node_modules/.test(url)) return 'node-redis';
  if (/node_modules\/ioredis|node_modules\/iovalkey/.test(url)) return 'ioredis';
  // The source under tsx, or the built tree (dist/, or a copy of it for bench/path-ab.ts).
  if (/\/src\/|\/dist\/|\.ab-dist/.test(url)) return `sluice ${short(url)}`;
  if (/\/bench\//.test(url)) return 'the bench loop';
  if (fn === 'runMicrotasks' || /task_queues|promise/.test(url)) return 'promises and ticks';
  return 'other (V8, Node.js internals)';
}

const totals = new Map<string, number>();
const functions = new Map<string, number>();
let busy = 0;
for (const [id, time] of self) {
  const node = byId.get(id) as Node;
  const cat = category(node);
  totals.set(cat, (totals.get(cat) ?? 0) + time);
  if (cat === 'idle') continue;
  busy += time;
  const { functionName, url, lineNumber } = node.callFrame;
  const name = `${functionName || '(anonymous)'} ${short(url)}:${lineNumber}`;
  functions.set(name, (functions.get(name) ?? 0) + time);
}
const pct = (t: number) => `${((100 * t) / busy).toFixed(1).padStart(5)}%`;
console.log(
  `busy ${(busy / 1000).toFixed(0)} ms (idle ${((totals.get('idle') ?? 0) / 1000).toFixed(0)} ms); shares of busy time:`,
);
for (const [cat, t] of [...totals].filter(([c]) => c !== 'idle').sort((a, b) => b[1] - a[1]))
  console.log(`${pct(t)}  ${cat}`);
console.log('top functions:');
for (const [name, t] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, Number(topText)))
  console.log(`${pct(t)}  ${name}`);
