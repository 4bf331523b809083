/**
 * Redis CPU per item of two batch scripts, interleaved on one private redis-server:
 * `node --import tsx bench/lua-ab.ts <other batch.ts> [items per phase] [batch] [rounds]`.
 *
 * A: this checkout's batch script; B: the one built by `<other batch.ts>` (another worktree's
 * `src/algorithms/batch.ts`, say the commit before a merge). Each round sends `items`
 * fixed-window takes on new random v2 keys with A, then with B (alternating which goes first),
 * as calls of `batch` items over a bare pipelined socket, and reads Redis CPU and EVALSHA time
 * per item for each phase (`INFO cpu commandstats`, reset between phases).
 */
import { batchId, batchScript } from '../src/algorithms/batch.js';
import { fixedWindowScript } from '../src/algorithms/fixed-window.js';
import { startRedisServer } from '../src/demo/redis-server.js';
import { scopeKey } from '../src/key.js';
import { RespFloorClient } from './resp-floor.js';

const [other, itemsText = '100000', batchText = '16', roundsText = '4'] = process.argv.slice(2);
if (other === undefined)
  throw new Error('usage: lua-ab.ts <other batch.ts> [items] [batch] [rounds]');
const otherScript = ((await import(other)) as { batchScript: { source: string } }).batchScript;
const items = Number(itemsText);
const batch = Number(batchText);
const id = String(batchId(fixedWindowScript));
const keyOf = (n: number) =>
  scopeKey('rate', 'fw.17b030aa42ef23f5', `t${n}`, 'GET/bench', undefined);

const redis = await startRedisServer();
try {
  const client = await RespFloorClient.connect(redis.url);
  const shas = {
    A: await client.scriptLoad(batchScript.source),
    B: await client.scriptLoad(otherScript.source),
  };
  const cpu = async () => {
    const text = String(await client.command(['INFO', 'cpu']));
    let total = 0;
    for (const m of text.matchAll(/used_cpu_(?:sys|user):([\d.]+)/g)) total += Number(m[1]);
    return total * 1e6;
  };
  let serial = 0;
  const phase = async (side: 'A' | 'B') => {
    const sha = shas[side];
    await client.command(['CONFIG', 'RESETSTAT']);
    const before = await cpu();
    let sent = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (sent < items) {
          sent += batch;
          const k: string[] = [];
          const argv: string[] = [];
          for (let j = 0; j < batch; j++) {
            k.push(keyOf(serial++));
            argv.push('t', '1', id, '3', '1000', '60000', '1');
          }
          await client.command(['EVALSHA', sha, String(k.length), ...k, ...argv]);
        }
      }),
    );
    const used = (await cpu()) - before;
    const stats = String(await client.command(['INFO', 'commandstats']));
    const evalsha = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(stats);
    return { cpu: used / sent, script: Number(evalsha?.[2] ?? 0) / sent };
  };
  const rows: Record<'A' | 'B', { cpu: number[]; script: number[] }> = {
    A: { cpu: [], script: [] },
    B: { cpu: [], script: [] },
  };
  for (let r = 0; r < Number(roundsText); r++) {
    for (const side of r % 2 === 0 ? (['A', 'B'] as const) : (['B', 'A'] as const)) {
      const m = await phase(side);
      rows[side].cpu.push(m.cpu);
      rows[side].script.push(m.script);
    }
  }
  const f = (xs: number[]) => {
    const sorted = [...xs].sort((x, y) => x - y);
    const median = sorted[Math.floor(sorted.length / 2)] as number;
    return `min ${(sorted[0] as number).toFixed(2)}, median ${median.toFixed(2)}, max ${(sorted[sorted.length - 1] as number).toFixed(2)}`;
  };
  console.log(`batches of ${batch}, ${items} items per phase`);
  for (const side of ['A', 'B'] as const) {
    console.log(
      `  ${side}: Redis CPU µs/item ${f(rows[side].cpu)}; EVALSHA µs/item ${f(rows[side].script)}`,
    );
  }
  await client.close();
} finally {
  await redis.stop();
}
