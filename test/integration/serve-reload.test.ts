/**
 * `sluice serve` hot reload, through a real gRPC client: a file added, changed, removed; a
 * bad file (the last good configuration keeps serving, reported in the log and the metrics,
 * `/healthcheck` stays 200); a Kubernetes ConfigMap's symlink swap; and a start without a
 * valid configuration (UNAVAILABLE, NOT_SERVING, `/healthcheck` 500 until one loads).
 */
import assert from 'node:assert/strict';
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { useRedis } from '../helpers/redis.js';
import { configDir, grpc, http, request, rlsClient, startServe } from '../helpers/serve.js';

const redis = useRedis();

const rules = (domain: string, key: string, rpu: number) => `
domain: ${domain}
descriptors:
  - key: ${key}
    rate_limit: { unit: hour, requests_per_unit: ${rpu} }
`;

/** Retries `check` until it passes, at most `ms`. */
async function eventually(check: () => Promise<void>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() > end) throw error;
      await sleep(50);
    }
  }
}

describe('sluice serve: hot reload', () => {
  it('add, change, remove, a bad file (the last good keeps serving)', async () => {
    const dir = configDir({ 'a.yaml': rules('one', 'x', 5) });
    const server = await startServe(dir, redis.server.url);
    const client = rlsClient(server.grpcPort);
    const limitOf = async (domain: string, key: string) =>
      (await client.should(request(domain, [`${key}=v`]))).statuses[0]?.current_limit
        ?.requests_per_unit;
    assert.equal(await limitOf('one', 'x'), 5);
    assert.equal(await limitOf('two', 'y'), undefined);

    writeFileSync(join(dir, 'b.yaml'), rules('two', 'y', 7));
    await eventually(async () => assert.equal(await limitOf('two', 'y'), 7));

    writeFileSync(join(dir, 'a.yaml'), rules('one', 'x', 9));
    await eventually(async () => assert.equal(await limitOf('one', 'x'), 9));

    writeFileSync(
      join(dir, 'c.yaml'),
      'domain: three\ndescriptors:\n  - key: z\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
    );
    await server.waitFor(/c\.yaml: descriptors\[0\]\.rate_limit\.unit: must be one of second/);
    assert.match(server.stderr(), /the last good one keeps serving/);
    assert.equal(await limitOf('two', 'y'), 7, 'the last good configuration serves');
    assert.deepEqual(await http(server.httpPort, '/healthcheck'), { status: 200, text: 'OK' });
    assert.match((await http(server.httpPort, '/metrics')).text, /sluice_serve_config_error 1/);

    rmSync(join(dir, 'c.yaml'));
    rmSync(join(dir, 'b.yaml'));
    await eventually(async () => assert.equal(await limitOf('two', 'y'), undefined));
    assert.match((await http(server.httpPort, '/metrics')).text, /sluice_serve_config_error 0/);
    assert.equal(await server.stop(), 0);
  });

  it('a ConfigMap’s symlink swap (..data renamed onto a new directory)', async () => {
    const dir = configDir();
    const version = (n: number, rpu: number) => {
      const at = join(dir, `..v${n}`);
      mkdirSync(at);
      writeFileSync(join(at, 'rules.yaml'), rules('cm', 'k', rpu));
      symlinkSync(`..v${n}`, join(dir, '..tmp'));
      renameSync(join(dir, '..tmp'), join(dir, '..data'));
    };
    version(1, 3);
    symlinkSync('..data/rules.yaml', join(dir, 'rules.yaml'));
    const server = await startServe(dir, redis.server.url);
    const client = rlsClient(server.grpcPort);
    const limit = async () =>
      (await client.should(request('cm', ['k=v']))).statuses[0]?.current_limit?.requests_per_unit;
    assert.equal(await limit(), 3);
    version(2, 4);
    await eventually(async () => assert.equal(await limit(), 4));
  });

  it('no valid configuration at start: UNAVAILABLE, NOT_SERVING, /healthcheck 500; then it loads', async () => {
    const dir = configDir({ 'a.yaml': 'domain: one\nunknown_key: 1\n' });
    const server = await startServe(dir, redis.server.url);
    assert.match(server.stderr(), /a\.yaml: unknown_key: unknown key/);
    const client = rlsClient(server.grpcPort);
    await assert.rejects(client.should(request('one', ['x=v'])), {
      code: grpc.status.UNAVAILABLE,
    });
    assert.equal((await client.check()).status, 'NOT_SERVING');
    assert.equal((await http(server.httpPort, '/healthcheck')).status, 500);
    writeFileSync(join(dir, 'a.yaml'), rules('one', 'x', 2));
    await eventually(async () => assert.equal((await client.check()).status, 'SERVING'));
    assert.equal((await client.should(request('one', ['x=v']))).overall_code, 'OK');
    assert.equal((await http(server.httpPort, '/healthcheck')).status, 200);
  });
});
