/**
 * Case C09 — spoofed X-Forwarded-For as identity: an IP-keyed limit of 5 per 60 s on a real
 * `node:http` server; every request comes from 127.0.0.1.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, describe, it } from 'node:test';
import { fixedWindow, RateLimiter } from 'sluice';
import { clientAddressOf, foldAddress } from 'sluice/http';
import { withRateLimit } from 'sluice/node';
import { TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const servers: Server[] = [];
after(() => {
  for (const server of servers) server.close();
});

async function ipLimited(trustProxy?: string, ipv6Prefix?: number) {
  const limiter = new RateLimiter({
    timeoutMs: TEST_TIMEOUT_MS,
    client: await redis.client(),
    namespace: `c09-${Math.random().toString(36).slice(2)}`,
  });
  const server = createServer(
    withRateLimit(
      {
        limiter,
        policy: fixedWindow({ limit: 5, windowMs: 60_000 }),
        route: 'POST/login',
        identify: clientAddressOf({
          ...(trustProxy === undefined ? {} : { trustProxy }),
          ...(ipv6Prefix === undefined ? {} : { ipv6Prefix }),
        }),
      },
      (_req, res) => res.end('ok'),
    ),
  );
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/login`;
  return async (xff: (i: number) => string) => {
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await fetch(url, { method: 'POST', headers: { 'x-forwarded-for': xff(i) } });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    return [statuses.filter((s) => s === 200).length, statuses.filter((s) => s === 429).length];
  };
}

describe('case C09: the client address, never a header the client wrote', () => {
  it('(a) no trusted proxy: 20 requests with a different X-Forwarded-For each → 5 × 200, 15 × 429', async () => {
    const run = await ipLimited();
    assert.deepEqual(await run((i) => `198.51.100.${i}`), [5, 15]);
  });

  it('(b) trusted proxy 127.0.0.1, only the leftmost entry varies → 5 × 200, 15 × 429', async () => {
    const run = await ipLimited('127.0.0.1');
    assert.deepEqual(await run((i) => `198.51.100.${i}, 203.0.113.7`), [5, 15]);
  });

  it('(c) client addresses cycling through one IPv6 /64 fold into one scope → 5 × 200, 15 × 429', async () => {
    const run = await ipLimited('loopback');
    assert.deepEqual(await run((i) => `2001:db8:1:2::${(i + 1).toString(16)}`), [5, 15]);
  });

  it('(d) ipv6Prefix 48: clients cycling through one /48 (a /56 each) fold into one scope; /128 keeps them apart', async () => {
    const wide = await ipLimited('loopback', 48);
    assert.deepEqual(await wide((i) => `2001:db8:7:${(i * 256).toString(16)}::1`), [5, 15]);
    const narrow = await ipLimited('loopback', 128);
    assert.deepEqual(await narrow((i) => `2001:db8:8::${(i + 1).toString(16)}`), [20, 0]);
  });

  it('ipv6Prefix: folds to any prefix; anything but an integer from 1 to 128 is refused', () => {
    assert.equal(foldAddress('2001:db8:1:2:aaaa:bbbb:cccc:dddd', 48), '2001:db8:1::/48');
    assert.equal(foldAddress('2001:db8:1:2ff::1', 56), '2001:db8:1:200::/56');
    assert.equal(foldAddress('2001:db8::1', 128), '2001:db8::1/128');
    assert.equal(foldAddress('ffff::1', 1), '8000::/1');
    assert.equal(foldAddress('203.0.113.7', 8), '203.0.113.7', 'IPv4 is never folded');
    for (const bad of [0, 129, 64.5, '64', Number.NaN, null]) {
      assert.throws(() => clientAddressOf({ ipv6Prefix: bad as never }), { field: 'ipv6Prefix' });
      assert.throws(() => foldAddress('2001:db8::1', bad as never), { field: 'ipv6Prefix' });
    }
    assert.throws(() => clientAddressOf({ ipv6prefix: 48 } as never), {
      field: 'options.ipv6prefix',
    });
  });

  it('folding: IPv4 as is, IPv4-mapped IPv6 as IPv4, IPv6 to its /64, garbage to nothing', () => {
    assert.equal(foldAddress('203.0.113.7'), '203.0.113.7');
    assert.equal(foldAddress('::ffff:203.0.113.7'), '203.0.113.7');
    assert.equal(foldAddress('2001:db8:1:2:aaaa:bbbb:cccc:dddd'), '2001:db8:1:2::/64');
    assert.equal(foldAddress('2001:db8:1:3::1'), '2001:db8:1:3::/64');
    assert.equal(foldAddress('not-an-ip'), undefined);
    assert.throws(() => clientAddressOf({ trustProxy: 'not a range' }), { field: 'trustProxy' });
  });
});
