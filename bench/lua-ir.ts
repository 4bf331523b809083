/**
 * Instructions Redis executes per batch item of two batch scripts, counted by callgrind:
 * `node --import tsx bench/lua-ir.ts <other batch.ts> [calls per phase] [batch] [rounds]`.
 *
 * Machine noise moves Redis CPU by 20–50 % on a shared 2-core machine; an instruction count
 * does not move. Starts a private `redis-server` under `valgrind --tool=callgrind` (with
 * collection off outside the measured phases), loads this checkout's batch script (A) and
 * the one `<other batch.ts>` builds (B), and for each round sends `calls` calls of `batch`
 * fixed-window takes on new random v2 keys with each script (alternating which goes first),
 * one call at a time, the same keys into an emptied keyspace (this private server's), reading
 * the instructions (Ir) of each phase with `callgrind_control`.
 * Needs valgrind; slow (about 50× a plain server).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { batchId, batchScript } from '../src/algorithms/batch.js';
import { fixedWindowScript } from '../src/algorithms/fixed-window.js';
import { scopeKey } from '../src/key.js';
import { RespFloorClient } from './resp-floor.js';

const [other, callsText = '200', batchText = '16', roundsText = '2'] = process.argv.slice(2);
if (other === undefined)
  throw new Error('usage: lua-ir.ts <other batch.ts> [calls] [batch] [rounds]');
/** A batch script's source: a `.lua` file as it is, else the `batchScript` a module builds. */
const sourceOf = async (path: string) =>
  path.endsWith('.lua')
    ? readFileSync(path, 'utf8')
    : ((await import(path)) as { batchScript: { source: string } }).batchScript.source;
const otherSource = await sourceOf(other);
// LUA_A=<file>: A is that file instead of this checkout's script (to try a variant).
const ownSource =
  process.env.LUA_A === undefined ? batchScript.source : await sourceOf(process.env.LUA_A);
const calls = Number(callsText);
const batch = Number(batchText);
const id = String(batchId(fixedWindowScript));
const keyOf = (n: number) =>
  scopeKey('rate', 'fw.17b030aa42ef23f5', `t${n}`, 'GET/bench', undefined);

const port = await new Promise<number>((resolve) => {
  const s = createServer().listen(0, '127.0.0.1', () => {
    const p = (s.address() as { port: number }).port;
    s.close(() => resolve(p));
  });
});
const dir = mkdtempSync(join(tmpdir(), 'lua-ir-'));
const server = spawn(
  'valgrind',
  [
    '--tool=callgrind',
    '--instr-atstart=no',
    `--callgrind-out-file=${join(dir, 'cg.out')}`,
    'redis-server',
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    // No background work in the measured phases (its share would depend on valgrind's pace).
    '--hz',
    '1',
    '--activerehashing',
    'no',
  ],
  { stdio: 'ignore' },
);
const control = (...args: string[]) => {
  const r = spawnSync('callgrind_control', [...args, String(server.pid)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`callgrind_control ${args.join(' ')}: ${r.stderr}`);
};
try {
  let client: RespFloorClient | undefined;
  for (let t = 0; t < 300 && client === undefined; t++) {
    try {
      client = await RespFloorClient.connect(`redis://127.0.0.1:${port}`);
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  if (client === undefined) throw new Error('redis-server under valgrind did not start');
  const shas = {
    A: await client.scriptLoad(ownSource),
    B: await client.scriptLoad(otherSource),
  };
  let serial = 0;
  const send = async (sha: string) => {
    const k: string[] = [];
    const argv: string[] = [];
    for (let j = 0; j < batch; j++) {
      k.push(keyOf(serial++));
      argv.push('t', '1', id, '3', '1000', '60000', '1');
    }
    await client.command(['EVALSHA', sha, String(k.length), ...k, ...argv]);
  };
  // Warm both (first calls allocate).
  for (let j = 0; j < 20; j++) {
    await send(shas.A);
    await send(shas.B);
  }
  const rows: Record<'A' | 'B', number[]> = { A: [], B: [] };
  let dump = 0;
  for (let r = 0; r < Number(roundsText); r++) {
    for (const side of r % 2 === 0 ? (['A', 'B'] as const) : (['B', 'A'] as const)) {
      // The same keys into an empty keyspace each phase: the same hash-table growth.
      await client.command(['FLUSHALL', 'SYNC']);
      serial = 0;
      control('--zero');
      control('--instr=on');
      for (let j = 0; j < calls; j++) await send(shas[side]);
      control('--instr=off');
      control('--dump');
      dump++;
      const files = readdirSync(dir).filter((f) => f.startsWith('cg.out.'));
      const text = readFileSync(
        join(
          dir,
          files
            .sort((x, y) => Number(x.split('.').pop()) - Number(y.split('.').pop()))
            .at(-1) as string,
        ),
        'utf8',
      );
      const total = /\ntotals: (\d+)/.exec(text);
      rows[side].push(Number(total?.[1] ?? Number.NaN) / (calls * batch));
    }
  }
  console.log(
    `batches of ${batch}, ${calls} calls per phase, ${dump} phases: instructions per item`,
  );
  for (const side of ['A', 'B'] as const) {
    console.log(`  ${side}: ${rows[side].map((x) => Math.round(x)).join(', ')}`);
  }
  await client.close();
} finally {
  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
