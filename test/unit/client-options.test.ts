/**
 * `connectRedis` refuses bad options with a typed error naming `options.<field>`,
 * before any socket is opened (a bad connect timeout once surfaced as "Redis unavailable"
 * and left a connection open that kept the process alive).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { InvalidInputError } from 'sluice';
import { connectRedis } from 'sluice/node-redis';

describe('connectRedis options', () => {
  it('names the bad field and never connects', async () => {
    // A listener that counts connections: a refused option must not reach it.
    let connections = 0;
    const server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const url = `redis://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const cases: [Record<string, unknown>, string][] = [
      [{ connectTimeoutMs: -1 }, 'options.connectTimeoutMs'],
      [{ connectTimeoutMs: 'x' }, 'options.connectTimeoutMs'],
      [{ connectTimeoutMs: 0 }, 'options.connectTimeoutMs'],
      [{ commandTimeoutMs: -5 }, 'options.commandTimeoutMs'],
      [{ stallTimeoutMs: -1 }, 'options.stallTimeoutMs'],
      [{ stallTimeoutMs: 1.5 }, 'options.stallTimeoutMs'],
      [{ stallTimeoutMs: 10 }, 'options.stallTimeoutMs'],
      [{ stallTimeoutMs: null }, 'options.stallTimeoutMs'],
      [{ stallTimeoutMs: 2 ** 40 }, 'options.stallTimeoutMs'],
      [{ reconnect: 'no' }, 'options.reconnect'],
      [{ onError: 'x' }, 'options.onError'],
      [{ onStall: 1 }, 'options.onStall'],
      [{ fastPath: 'yes' }, 'options.fastPath'],
      [{ fastPath: 0 }, 'options.fastPath'],
      [{ url: 42 }, 'options.url'],
      [{ url: 'nonsense' }, 'options.url'],
      [{ url: 'http://127.0.0.1:6379' }, 'options.url'],
      [{ stallTimeout: 100 }, 'options.stallTimeout'],
    ];
    try {
      for (const [options, field] of cases) {
        await assert.rejects(connectRedis({ url, ...options } as never), (error: unknown) => {
          assert.ok(error instanceof InvalidInputError, `${JSON.stringify(options)}: ${error}`);
          assert.equal(error.field, field);
          return true;
        });
      }
      await assert.rejects(connectRedis('x' as never), InvalidInputError);
      // Options that throw when read (a getter, a Proxy trap): InvalidInputError, never raw.
      const boom = () => {
        throw new Error('boom');
      };
      const unreadable: [unknown, string][] = [
        [
          Object.defineProperty({ url }, 'password', { get: boom, enumerable: true }),
          'options.password',
        ],
        [new Proxy({ url }, { ownKeys: boom }), 'options'],
        [
          { url, tls: Object.defineProperty({}, 'ca', { get: boom, enumerable: true }) },
          'options.tls.ca',
        ],
        [{ url: `redis://${'h'.repeat(5000)}:6379` }, 'options.url'],
      ];
      for (const [options, field] of unreadable) {
        await assert.rejects(connectRedis(options as never), (error: unknown) => {
          assert.ok(error instanceof InvalidInputError, `${field}: ${error}`);
          assert.equal(error.field, field);
          return true;
        });
      }
      assert.equal(connections, 0, 'no connection was opened for a bad option');
    } finally {
      server.close();
    }
  });
});
