/**
 * The seed's coalescing floor: the lab seed's script (GET, INCR, PTTL, PEXPIRE once) as a
 * loop over up to 128 keys per `EVALSHA`, over a bare pipelined RESP socket
 * (../resp-floor.ts). The takes of one tick go together, 128 at most per call; no
 * validation, no hashing (the key as given), no deadline, no isolation of one key's failure.
 * What Redis sustains for a rate limiter that batches and does nothing else: the distance
 * to this machine's limit, in every run.
 */
import { RespFloorClient } from '../resp-floor.js';
import type { Contender } from '../types.js';

const BATCH = 128;

const LUA = `local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local n = tonumber(redis.call('GET', key) or '0')
  local allowed = 0
  if n < limit then
    n = redis.call('INCR', key)
    allowed = 1
  end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then redis.call('PEXPIRE', key, window); ttl = window end
  out[#out + 1] = allowed
  out[#out + 1] = limit - n
  out[#out + 1] = ttl
end
return out
`;

interface Waiting {
  readonly key: string;
  resolve(allowed: boolean): void;
  reject(error: Error): void;
}

export const contender: Contender = {
  name: 'seed-floor',
  description:
    "the seed's script looped over up to 128 keys per EVALSHA, on a bare RESP socket (no hashing)",
  async setup(url, { limit, windowMs }) {
    const client = await RespFloorClient.connect(url);
    const sha = await client.scriptLoad(LUA);
    const args = [String(limit), String(windowMs)];
    let waiting: Waiting[] = [];
    const send = () => {
      const batch = waiting;
      waiting = [];
      if (batch.length === 0) return;
      const command = ['EVALSHA', sha, String(batch.length)];
      for (const w of batch) command.push(`seed:${w.key}`);
      command.push(...args);
      client.command(command).then(
        (reply) => {
          const flat = reply as number[];
          for (const [i, w] of batch.entries()) w.resolve(flat[3 * i] === 1);
        },
        (error: Error) => {
          for (const w of batch) w.reject(error);
        },
      );
    };
    return {
      take: (key) =>
        new Promise<boolean>((resolve, reject) => {
          if (waiting.length === 0) queueMicrotask(send);
          waiting.push({ key, resolve, reject });
          if (waiting.length >= BATCH) send();
        }),
      close: () => client.close(),
    };
  },
};
