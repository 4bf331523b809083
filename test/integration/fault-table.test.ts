/**
 * The fault table of docs/failures.md, produced by this test: every fault of Redis, the network
 * or the caller is run against a fail-closed `node:http` route, and its row — the typed
 * outcome `take` gives, the HTTP status, and the bound on the time to that answer — is
 * checked against what happened. docs/failures.md must contain the rendered table verbatim.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixedWindow, isSluiceError, RateLimiter } from 'sluice';
import { withRateLimit } from 'sluice/node';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { type ProxyMode, startTcpProxy, type TcpProxy } from '../../src/demo/tcp-proxy.js';
import { type Client, fillMemory, keyFor, randomTenant, useRedis } from '../helpers/redis.js';
import { boundFor, within } from '../helpers/within.js';

const redis = useRedis();
const TIMEOUT_MS = 150;
const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
const route = 'POST/orders';
const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

type Bound = 'at once' | 'at the deadline' | 'within the deadline';
const LIMIT_MS: Record<Bound, [number, number]> = {
  'at once': [0, 100],
  'at the deadline': [TIMEOUT_MS - 5, TIMEOUT_MS + 250],
  'within the deadline': [0, TIMEOUT_MS + 250],
};

interface Row {
  readonly fault: string;
  /** `take`'s outcome: an error code, or `decision`. */
  readonly outcome: string;
  readonly status: number;
  readonly bound: Bound;
  /** Sets the fault up on a fresh limiter; returns the server to request and a cleanup. */
  readonly arrange: () => Promise<{ client: Client; tenant: string; inject: () => Promise<void> }>;
}

async function ownServer(args: string[] = []): Promise<PrivateRedis> {
  const server = await startRedisServer(args);
  cleanups.push(() => server.stop());
  return server;
}

async function viaProxy(): Promise<{ proxy: TcpProxy; client: Client }> {
  const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
  cleanups.push(() => proxy.close());
  return { proxy, client: await redis.client({ url: `redis://127.0.0.1:${proxy.port}` }) };
}

/** `arrange` of a network fault: a client through the proxy, the fault a proxy mode. */
function proxyFault(mode: ProxyMode, delayMs?: number): Row['arrange'] {
  return async () => {
    const { proxy, client } = await viaProxy();
    return {
      client,
      tenant: randomTenant(),
      inject: async () => {
        if (delayMs !== undefined) proxy.delayMs = delayMs;
        proxy.mode = mode;
      },
    };
  };
}

const ROWS: Row[] = [
  {
    fault: 'Redis process killed (`kill -9`)',
    outcome: 'SLUICE_UNAVAILABLE',
    status: 503,
    bound: 'at once',
    arrange: async () => {
      const server = await ownServer();
      const client = await redis.client({ url: server.url, reconnect: true });
      return { client, tenant: randomTenant(), inject: () => server.kill() };
    },
  },
  {
    fault: 'connection lost after the command was sent',
    outcome: 'SLUICE_UNAVAILABLE',
    status: 503,
    bound: 'within the deadline',
    arrange: proxyFault('cut-after-send'),
  },
  {
    fault: 'connection reset (TCP RST) after the command was sent',
    outcome: 'SLUICE_UNAVAILABLE',
    status: 503,
    bound: 'within the deadline',
    arrange: proxyFault('reset-after-send'),
  },
  {
    fault: 'replies delayed past the deadline (network)',
    outcome: 'SLUICE_TIMEOUT',
    status: 503,
    bound: 'at the deadline',
    arrange: proxyFault('delay', 600),
  },
  {
    fault: 'network black hole',
    outcome: 'SLUICE_TIMEOUT',
    status: 503,
    bound: 'at the deadline',
    arrange: proxyFault('blackhole'),
  },
  {
    fault: 'network black hole, once the watchdog recycled the connection (`stallTimeoutMs`)',
    outcome: 'SLUICE_UNAVAILABLE',
    status: 503,
    bound: 'at once',
    arrange: async () => {
      const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
      cleanups.push(() => proxy.close());
      let stalls = 0;
      const client = await redis.client({
        url: `redis://127.0.0.1:${proxy.port}`,
        reconnect: true,
        stallTimeoutMs: 300,
        onStall: () => {
          stalls++;
        },
      });
      return {
        client,
        tenant: randomTenant(),
        inject: async () => {
          proxy.mode = 'blackhole';
          const bound = performance.now() + boundFor(300);
          while (stalls === 0) {
            if (performance.now() > bound) assert.fail('the watchdog found no stall');
            await sleep(10);
          }
        },
      };
    },
  },
  {
    fault: 'replies delayed past the deadline (`CLIENT PAUSE`)',
    outcome: 'SLUICE_TIMEOUT',
    status: 503,
    bound: 'at the deadline',
    arrange: async () => {
      const server = await ownServer();
      const client = await redis.client({ url: server.url });
      const admin = await redis.client({ url: server.url });
      return {
        client,
        tenant: randomTenant(),
        inject: async () =>
          void (await admin.client.sendCommand(['CLIENT', 'PAUSE', '700', 'ALL'])),
      };
    },
  },
  {
    fault: 'Redis busy (`DEBUG SLEEP`)',
    outcome: 'SLUICE_TIMEOUT',
    status: 503,
    bound: 'at the deadline',
    arrange: async () => {
      const server = await ownServer(['--enable-debug-command', 'yes']);
      const client = await redis.client({ url: server.url });
      const admin = await redis.client({ url: server.url });
      return {
        client,
        tenant: randomTenant(),
        inject: async () => {
          admin.client.sendCommand(['DEBUG', 'SLEEP', '0.7']).catch(() => {});
          await sleep(20);
        },
      };
    },
  },
  {
    fault: 'script cache flushed (`SCRIPT FLUSH`, restart, failover)',
    outcome: 'decision',
    status: 200,
    bound: 'within the deadline',
    arrange: async () => {
      const client = await redis.client();
      const admin = await redis.admin();
      return {
        client,
        tenant: randomTenant(),
        inject: async () => void (await admin.client.scriptFlush()),
      };
    },
  },
  {
    fault: '`maxmemory` reached under `noeviction`',
    outcome: 'SLUICE_STORE_ERROR',
    status: 503,
    bound: 'at once',
    arrange: async () => {
      const server = await ownServer(['--maxmemory', '4mb', '--maxmemory-policy', 'noeviction']);
      const client = await redis.client({ url: server.url });
      return {
        client,
        tenant: randomTenant(),
        inject: () => fillMemory(client),
      };
    },
  },
  {
    fault: 'key of the wrong type (written by something else)',
    outcome: 'SLUICE_STORE_ERROR',
    status: 503,
    bound: 'at once',
    arrange: async () => {
      const client = await redis.client();
      const tenant = randomTenant();
      return {
        client,
        tenant,
        inject: async () =>
          void (await (await redis.admin()).client.hSet(keyFor(policy, tenant, route), 'x', '1')),
      };
    },
  },
  {
    fault: 'client closed by the application',
    outcome: 'SLUICE_UNAVAILABLE',
    status: 503,
    bound: 'at once',
    arrange: async () => {
      const client = await redis.client();
      return { client, tenant: randomTenant(), inject: async () => client.destroy() };
    },
  },
];

/** The table as docs/failures.md shows it. */
export function renderFaultTable(): string {
  const lines = [
    '| fault | `take` gives | HTTP (fail-closed) | time to the answer |',
    '| --- | --- | --- | --- |',
    ...ROWS.map((r) => {
      const outcome = r.outcome === 'decision' ? 'a decision' : `\`${r.outcome}\``;
      const status = r.status === 503 ? '`503`, `Retry-After: 1`' : `\`${r.status}\``;
      return `| ${r.fault} | ${outcome} | ${status} | ${r.bound} (deadline ${TIMEOUT_MS} ms) |`;
    }),
  ];
  return lines.join('\n');
}

describe('the fault table of docs/failures.md is what the tests observe', () => {
  for (const row of ROWS) {
    it(row.fault, async () => {
      const { client, tenant, inject } = await row.arrange();
      const limiter = new RateLimiter({ client, timeoutMs: TIMEOUT_MS });
      let handled = 0;
      const server: Server = createServer(
        withRateLimit({ limiter, policy, route, identify: () => tenant }, (_req, res) => {
          handled++;
          res.end('ok');
        }),
      );
      cleanups.push(() => void server.close());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const address = server.address();
      const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/orders`;
      assert.equal(
        (await limiter.take({ tenant: randomTenant(), route }, policy)).allowed,
        true,
        'healthy first',
      );
      await inject();
      const started = performance.now();
      const outcome = await within(
        limiter.take({ tenant, route }, policy).then(
          () => 'decision',
          (error: unknown) => (isSluiceError(error) ? error.code : `untyped: ${String(error)}`),
        ),
        boundFor(TIMEOUT_MS),
        `take under "${row.fault}"`,
      );
      const elapsed = performance.now() - started;
      // Over HTTP, with the same fault (the proxy and server faults persist; re-inject the rest).
      if (row.outcome !== 'decision') await inject().catch(() => {});
      const res = await within(
        fetch(url, { method: 'POST' }),
        boundFor(TIMEOUT_MS),
        `HTTP request under "${row.fault}"`,
      );
      await res.arrayBuffer();
      console.log(`${row.fault}: ${outcome}, HTTP ${res.status}, ${elapsed.toFixed(0)} ms`);
      assert.equal(outcome, row.outcome);
      assert.equal(res.status, row.status);
      if (row.status === 503) {
        assert.equal(res.headers.get('retry-after'), '1');
        assert.equal(handled, 0, 'the handler never runs when the limiter failed');
      }
      const [low, high] = LIMIT_MS[row.bound];
      assert.ok(elapsed >= low && elapsed <= high, `${elapsed.toFixed(0)} ms is not ${row.bound}`);
    });
  }

  it('docs/failures.md contains this table verbatim', () => {
    const page = readFileSync(new URL('../../docs/failures.md', import.meta.url), 'utf8');
    assert.ok(
      page.includes(renderFaultTable()),
      `docs/failures.md lacks the fault table:\n${renderFaultTable()}`,
    );
  });
});
