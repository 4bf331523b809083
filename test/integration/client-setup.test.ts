/**
 * `connectRedis` against real servers that refuse the connection's setup: a wrong
 * password, none, an unknown ACL user, a user without permission, a database index the
 * server lacks, `rediss://` to a plain server, an untrusted certificate — each a
 * `RedisConfigError` naming its reason, never "Redis unavailable" — and TLS with a private
 * CA through the client's own options (no process-wide NODE_EXTRA_CA_CERTS).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  fixedWindow,
  InvalidInputError,
  RateLimiter,
  RedisConfigError,
  UnavailableError,
} from 'sluice';
import { type ConnectRedisOptions, connectRedis } from 'sluice/node-redis';
import { freePort, type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { TEST_TIMEOUT_MS } from '../helpers/redis.js';

const servers: PrivateRedis[] = [];
const dir = mkdtempSync(join(tmpdir(), 'sluice-tls-'));
after(async () => {
  for (const server of servers) await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Connects, or resolves the error it rejected with. */
async function attempt(options: ConnectRedisOptions): Promise<unknown> {
  try {
    const client = await connectRedis({ reconnect: false, onError: () => {}, ...options });
    client.destroy();
    return 'connected';
  } catch (error) {
    return error;
  }
}

function assertRefused(error: unknown, reason: string): void {
  assert.ok(error instanceof RedisConfigError, `expected RedisConfigError, got ${String(error)}`);
  assert.equal(error.reason, reason);
  assert.equal(error.code, 'SLUICE_REDIS_CONFIG');
  assert.ok(!(error instanceof UnavailableError));
}

describe('connectRedis: authentication and database', () => {
  let url = '';
  before(async () => {
    const server = await startRedisServer(['--requirepass', 'sesame']);
    servers.push(server);
    url = server.url;
    const admin = await connectRedis({ url, password: 'sesame' });
    await admin.client.sendCommand([
      'ACL',
      'SETUSER',
      'weak',
      'on',
      '>pw',
      '-@all',
      '+hello',
      '+ping',
    ]);
    await admin.client.sendCommand(['ACL', 'SETUSER', 'app', 'on', '>apppw', '+@all', '~*']);
    admin.destroy();
  });

  it('the right password (and an ACL user, a database) connects and decides', async () => {
    const client = await connectRedis({
      url,
      username: 'app',
      password: 'apppw',
      database: 3,
    });
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const decision = await limiter.take({ tenant: 'a' }, fixedWindow({ limit: 1, windowMs: 1000 }));
    assert.equal(decision.allowed, true);
    assert.equal(
      await client.client.sendCommand(['CLIENT', 'INFO']).then((info) => /db=3/.test(String(info))),
      true,
    );
    client.destroy();
    assert.equal(await attempt({ url: url.replace('redis://', 'redis://:sesame@') }), 'connected');
  });

  it('WRONGPASS, NOAUTH, an unknown user, NOPERM and a missing database are RedisConfigErrors', async () => {
    assertRefused(await attempt({ url, password: 'wrong' }), 'wrong-password');
    assertRefused(await attempt({ url }), 'auth-required');
    assertRefused(await attempt({ url, username: 'ghost', password: 'x' }), 'wrong-password');
    assertRefused(
      await attempt({ url, username: 'weak', password: 'pw', database: 1 }),
      'no-permission',
    );
    assertRefused(await attempt({ url, password: 'sesame', database: 99 }), 'database');
  });

  it('a password given to a server that has none is a RedisConfigError, not an outage', async () => {
    const open = await startRedisServer();
    servers.push(open);
    // "ERR AUTH <password> called without any password configured": it was UnavailableError.
    assertRefused(await attempt({ url: open.url, password: 'pw2' }), 'wrong-password');
    assertRefused(
      await attempt({ url: open.url.replace('redis://', 'redis://:pw2@') }),
      'wrong-password',
    );
  });

  it('bad options are InvalidInputErrors before anything connects', async () => {
    for (const [options, field] of [
      [{ database: -1 }, 'options.database'],
      [{ database: 1.5 }, 'options.database'],
      [{ password: '' }, 'options.password'],
      [{ tls: 'yes' }, 'options.tls'],
      [{ tls: { ca: 42 } }, 'options.tls'],
      [{ tls: { cafile: 'x' } }, 'options.tls.cafile'],
      [{ url: 'rediss://127.0.0.1:1', tls: false }, 'options.tls'],
    ] as const) {
      const error = await attempt(options as ConnectRedisOptions);
      assert.ok(error instanceof InvalidInputError, `${JSON.stringify(options)}: ${String(error)}`);
      assert.equal(error.field, field);
    }
  });
});

describe('connectRedis: TLS', () => {
  let plain: PrivateRedis;
  let tlsUrl = '';
  let ca = '';
  before(async () => {
    const openssl = (...args: string[]) =>
      execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    openssl(
      'req',
      '-x509',
      ...ec,
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '2',
      '-subj',
      '/CN=sluice test CA',
    );
    openssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost');
    writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
    openssl(
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'server.crt',
      '-days',
      '2',
      '-extfile',
      'ext.cnf',
    );
    ca = readFileSync(join(dir, 'ca.crt'), 'utf8');
    const tlsPort = await freePort();
    plain = await startRedisServer([
      '--tls-port',
      String(tlsPort),
      '--tls-cert-file',
      join(dir, 'server.crt'),
      '--tls-key-file',
      join(dir, 'server.key'),
      '--tls-ca-cert-file',
      join(dir, 'ca.crt'),
      '--tls-auth-clients',
      'no',
    ]);
    servers.push(plain);
    tlsUrl = `rediss://127.0.0.1:${tlsPort}`;
  });

  it('a private CA through the client’s own options connects and decides', async () => {
    const client = await connectRedis({ url: tlsUrl, tls: { ca } });
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    assert.equal(
      (await limiter.take({ tenant: 't' }, fixedWindow({ limit: 1, windowMs: 1000 }))).allowed,
      true,
    );
    client.destroy();
    // `tls` with a redis:// URL means TLS too.
    assert.equal(
      await attempt({ url: tlsUrl.replace('rediss://', 'redis://'), tls: { ca } }),
      'connected',
    );
  });

  it('an untrusted certificate and rediss:// to a plain server are RedisConfigErrors (tls)', async () => {
    assertRefused(await attempt({ url: tlsUrl }), 'tls');
    assertRefused(await attempt({ url: plain.url.replace('redis://', 'rediss://') }), 'tls');
  });

  it('a server that accepts the connection and never answers is UnavailableError, not a hang', async () => {
    const hole = createServer(() => {}).listen(0, '127.0.0.1');
    await once(hole, 'listening');
    try {
      const url = `redis://127.0.0.1:${(hole.address() as AddressInfo).port}`;
      const started = Date.now();
      const error = await attempt({ url, connectTimeoutMs: 100, stallTimeoutMs: 200 });
      assert.ok(error instanceof UnavailableError, String(error));
      assert.match((error as Error).message, /handshake/);
      assert.ok(Date.now() - started < 5000, 'bounded by connectTimeoutMs + stallTimeoutMs');
    } finally {
      hole.close();
    }
  });

  it('an unreachable server stays UnavailableError', async () => {
    const error = await attempt({ url: `rediss://127.0.0.1:${await freePort()}` });
    assert.ok(error instanceof UnavailableError);
  });
});
