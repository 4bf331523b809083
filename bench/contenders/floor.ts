/**
 * The floor: sluice's own Lua script over the smallest client that can send it, a pipelined
 * RESP connection on `node:net` (see ../resp-floor.ts). No deadline, no validation, no key
 * hashing: a measuring stick for what the script and one socket cost.
 */
import { readFileSync } from 'node:fs';
import { RespFloorClient } from '../resp-floor.js';
import type { Contender } from '../types.js';

const SCRIPT = new URL('../../src/algorithms/fixed-window.lua', import.meta.url);

export const contender: Contender = {
  name: 'floor',
  description: "raw pipelined RESP on node:net, EVALSHA of sluice's fixed-window.lua",
  async setup(url, { limit, windowMs }) {
    const client = await RespFloorClient.connect(url);
    const sha = await client.scriptLoad(readFileSync(SCRIPT, 'utf8'));
    const take = client.evalshaTemplate(sha, 'floor:', [String(limit), String(windowMs), '1']);
    return {
      take: (key) => take(key).then((reply) => reply[0] === 1),
      close: () => client.close(),
    };
  },
};
