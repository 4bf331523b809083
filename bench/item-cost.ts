/**
 * What one item of the batch script costs Redis: `node --import tsx bench/item-cost.ts
 * [items] [batch] [short|v2] [batch|empty] [runs|items]`.
 *
 * Starts a private redis-server and sends `items` fixed-window takes on distinct random
 * keys (the write path of the `random` scenario) as batch-script calls of `batch` items each,
 * over a bare pipelined socket (bench/resp-floor.ts), a few calls in flight. Keys are v2
 * keys (`scopeKey`, ~92 bytes) or, with `short`, as short as rate-limiter-flexible's
 * (~12 bytes), to show what key length costs. Prints Redis CPU and script time per item
 * (`INFO cpu commandstats`) and each inner command's share. No Node.js client in the way.
 * The takes of a call share one policy and cost: by default they go as one run (`u`, as the
 * coalescer writes them, see batch-wire.ts); with `items`, each as its own entry (`t`, the
 * format before runs), to show what the run saves.
 */
import { batchId, batchScript } from '../src/algorithms/batch.js';
import { fixedWindowScript } from '../src/algorithms/fixed-window.js';
import { startRedisServer } from '../src/demo/redis-server.js';
import { scopeKey } from '../src/key.js';
import { RespFloorClient } from './resp-floor.js';

const [itemsText = '200000', batchText = '128', keys = 'v2', script = 'batch', wire = 'runs'] =
  process.argv.slice(2);
const items = Number(itemsText);
const batch = Number(batchText);
const id = String(batchId(fixedWindowScript));
const keyOf =
  keys === 'short'
    ? (n: number) => `rlf:t${n}`
    : (n: number) => scopeKey('rate', 'fw.17b030aa42ef23f5', `t${n}`, 'GET/bench', undefined);

const redis = await startRedisServer();
try {
  const client = await RespFloorClient.connect(redis.url);
  // `empty`: a script that returns at once, given the same keys and arguments: what parsing
  // the call and building KEYS and ARGV cost before any item runs.
  const sha = await client.scriptLoad(script === 'empty' ? 'return 0' : batchScript.source);
  const cpu = async () => {
    const text = String(await client.command(['INFO', 'cpu']));
    let total = 0;
    for (const m of text.matchAll(/used_cpu_(?:sys|user):([\d.]+)/g)) total += Number(m[1]);
    return total * 1e6;
  };
  const call = (first: number) => {
    const k: string[] = [];
    const argv: string[] = [];
    if (wire === 'runs') argv.push('u', String(batch), id, '3', '1000', '60000', '1');
    for (let j = 0; j < batch; j++) {
      k.push(keyOf(Math.floor(Math.random() * 1e6) * 1000 + first + j));
      if (wire !== 'runs') argv.push('t', '1', id, '3', '1000', '60000', '1');
    }
    return client.command(['EVALSHA', sha, String(k.length), ...k, ...argv]);
  };
  await client.command(['CONFIG', 'RESETSTAT']);
  const before = await cpu();
  const inFlight = 4;
  let sent = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (sent < items) {
        const first = sent;
        sent += batch;
        await call(first);
      }
    }),
  );
  const redisCpu = (await cpu()) - before;
  const stats = String(await client.command(['INFO', 'commandstats']));
  console.log(
    `${sent} items, batches of ${batch} (${wire}), ${keys} keys (${keyOf(1).length} bytes), ${script} script: Redis CPU ${(redisCpu / sent).toFixed(2)} µs/item`,
  );
  for (const m of stats.matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)) {
    const [, cmd, calls, usec] = m;
    if (cmd === 'info' || cmd === 'config|resetstat') continue;
    console.log(
      `  ${cmd}: ${(Number(calls) / sent).toFixed(3)} calls/item, ${(Number(usec) / sent).toFixed(2)} µs/item`,
    );
  }
  await client.close();
} finally {
  await redis.stop();
}
