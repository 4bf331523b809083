/**
 * Where a `sluice serve` process's busy time goes, from a `node --cpu-prof` profile of it
 * (`bench/serve/run.ts --server-node-args "--cpu-prof --cpu-prof-dir=DIR"`):
 *
 *   node --import tsx bench/serve/profile-summary.ts <file.cpuprofile> [--busiest-ms 5000] [--top 30]
 *
 * `--busiest-ms`: only the samples of the N ms of the profile with the most busy time (the
 * measured case; start-up, warm-up and the idle end left out). Each sample is put in the category of its innermost
 * frame that says whose work it is, walking out past generic frames (events, promises, native
 * calls without a script): Node's HTTP/2, `@grpc/grpc-js`, protobufjs (proto-loader's dynamic
 * messages), sluice's serve code by file, sluice's limiter, sluice's Redis client, socket
 * writes, timers, garbage collection. Then the inclusive share of a few serve entry points
 * (the time spent in them and in everything they called), and the top functions by self time.
 */
import { readFileSync } from 'node:fs';

interface Frame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface Node {
  readonly id: number;
  readonly callFrame: Frame;
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly Node[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith('--') && !/^\d+$/.test(a));
const option = (name: string, fallback: number) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
if (file === undefined) {
  throw new Error('usage: profile-summary.ts <file.cpuprofile> [--busiest-ms N] [--top N]');
}
const SPAN_MS = option('--busiest-ms', 0);
const TOP = option('--top', 30);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

/** The category a frame alone says, or undefined for a generic frame (look at its caller). */
function category(f: Frame): string | undefined {
  const { functionName: fn, url } = f;
  if (fn === '(idle)') return 'idle';
  if (fn === '(garbage collector)') return 'garbage collection';
  if (fn === '(program)') return 'V8 (program: compiled code, the runtime)';
  if (fn === '(root)') return 'V8 (program: compiled code, the runtime)';
  if (/^(writeUtf8String|writev|writeBuffer|writeLatin1String)$/.test(fn)) {
    return 'socket writes (the system calls)';
  }
  if (/node_modules\/@grpc\/grpc-js\//.test(url)) return 'grpc-js';
  if (/node_modules\/(protobufjs|@grpc\/proto-loader|@protobufjs)\//.test(url)) {
    return 'protobuf (proto-loader, protobufjs)';
  }
  // protobufjs's generated code (`new Function`): RateLimitRequest$decode and the like.
  if (url === '' && /\$(decode|encode|fromObject|toObject|verify)$/.test(fn)) {
    return 'protobuf (proto-loader, protobufjs)';
  }
  if (/node:internal\/http2|node:http2/.test(url)) return "Node's HTTP/2";
  if (/node:net|stream_base_commons|node:internal\/streams/.test(url)) return 'socket streams';
  if (/node:internal\/timers|node:timers/.test(url)) return 'timers';
  if (/node:internal\/(modules|deps|source_map|bootstrap)|\/tsx\//.test(url)) return 'start-up';
  if (/node_modules\/@redis\//.test(url)) return 'node-redis';
  if (/node:internal\/crypto/.test(url)) return 'SHA-256 (key hashing)';
  if (/\/bench\//.test(url)) return 'the bench harness';
  const own = /\/(?:dist|src)\/(.*)\.[jt]s$/.exec(url);
  if (own) {
    const path = own[1] as string;
    if (path.startsWith('serve/')) return `sluice ${path}`;
    if (path.startsWith('redis/')) return 'sluice Redis client (redis/)';
    return 'sluice limiter (limiter/, algorithms/, …)';
  }
  return undefined;
}

const selfOf = (id: number): string => {
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const c = category((byId.get(at) as Node).callFrame);
    if (c !== undefined) return c;
  }
  const fn = (byId.get(id) as Node).callFrame.functionName;
  return fn === 'runMicrotasks' ? 'promises and ticks' : 'other (Node.js internals)';
};

/** Entry points whose inclusive time is reported: by function name and file. */
const ENTRIES: readonly [string, RegExp, RegExp][] = [
  [
    'sluice serve: the handler (all of sluice under it)',
    /^shouldRateLimit$/,
    /serve\/service\.[jt]s$/,
  ],
  ['  readRequest (the request checked)', /^readRequest$/, /serve\/request\.[jt]s$/],
  [
    '  Decider.decide (plan, takeAll, answer)',
    /^(decide|#sluice|#answer)$/,
    /serve\/decide\.[jt]s$/,
  ],
  ['    plan (rule matching)', /^plan$/, /serve\/plan\.[jt]s$/],
  ['    RuleSet.match', /^match$/, /serve\/rules\/tree\.[jt]s$/],
  ['    limiter.takeAll', /^takeAll$/, /limiter\/rate-limiter\.[jt]s$/],
  ['  metrics', /.*/, /serve\/metrics\.[jt]s$/],
  ['  turn gate', /.*/, /serve\/turn-gate\.[jt]s$/],
  ['grpc-js: a call (its stream handler, interceptors)', /.*/, /@grpc\/grpc-js\//],
  [
    'protobuf decode/encode',
    /\$(decode|encode|fromObject|toObject)$|^(decode|encode|fromObject|toObject)$/,
    /.*/,
  ],
];

let total = 0;
let busy = 0;
const totals = new Map<string, number>();
const functions = new Map<string, number>();
const entries = ENTRIES.map(() => 0);
const window: [number, number][] = [];
{
  let t = 0;
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i] ?? 0;
    window.push([id, t]);
  });
}
/** The span of SPAN_MS with the most busy samples (all of it without --busiest-ms). */
let from = 0;
let to = Number.POSITIVE_INFINITY;
if (SPAN_MS > 0) {
  let best = -1;
  let busyIn = 0;
  let start = 0;
  const isIdle = (i: number) =>
    (byId.get(window[i]?.[0] as number) as Node).callFrame.functionName === '(idle)';
  for (let i = 0; i < window.length; i++) {
    if (!isIdle(i)) busyIn += profile.timeDeltas[i + 1] ?? 0;
    while ((window[i]?.[1] as number) - (window[start]?.[1] as number) > SPAN_MS * 1000) {
      if (!isIdle(start)) busyIn -= profile.timeDeltas[start + 1] ?? 0;
      start++;
    }
    if (busyIn > best) {
      best = busyIn;
      from = window[start]?.[1] as number;
      to = window[i]?.[1] as number;
    }
  }
}
for (let i = 0; i < window.length; i++) {
  const [id, t] = window[i] as [number, number];
  if (t < from || t > to) continue;
  const dt = profile.timeDeltas[i + 1] ?? 0; // the time until the next sample
  total += dt;
  const cat = selfOf(id);
  totals.set(cat, (totals.get(cat) ?? 0) + dt);
  if (cat === 'idle') continue;
  busy += dt;
  const f = (byId.get(id) as Node).callFrame;
  const name = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*(node_modules|dist)\//, '')}:${f.lineNumber}`;
  functions.set(name, (functions.get(name) ?? 0) + dt);
  const seen = ENTRIES.map(() => false);
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const frame = (byId.get(at) as Node).callFrame;
    ENTRIES.forEach(([, fn, url], k) => {
      if (!seen[k] && fn.test(frame.functionName) && url.test(frame.url)) seen[k] = true;
    });
  }
  seen.forEach((s, k) => {
    if (s) entries[k] = (entries[k] as number) + dt;
  });
}
const pct = (t: number) => `${((100 * t) / busy).toFixed(1).padStart(5)}%`;
console.log(
  `busy ${(busy / 1000).toFixed(0)} ms of ${(total / 1000).toFixed(0)} ms${SPAN_MS > 0 ? ` (the busiest ${SPAN_MS} ms)` : ''}; shares of busy time, by whose work (self time):`,
);
for (const [cat, t] of [...totals].filter(([c]) => c !== 'idle').sort((a, b) => b[1] - a[1])) {
  console.log(`${pct(t)}  ${cat}`);
}
console.log('inclusive (the time in these and in what they called):');
ENTRIES.forEach(([name], k) => {
  console.log(`${pct(entries[k] as number)}  ${name}`);
});
console.log('top functions (self time):');
for (const [name, t] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
  console.log(`${pct(t)}  ${name}`);
}
