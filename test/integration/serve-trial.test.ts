/**
 * `sluice serve` against the findings of an operator's trial (issue 25), through a real gRPC
 * client on a server in a process of its own: a refused request reports the state after its
 * charge; `requests_per_unit: 0` denies without Redis; an unknown domain has no limit, its
 * overrides included; metric labels stay bounded; override keys never collide; a key too long
 * is named by its descriptor; a YAML file with many aliases loads and one past the bound is
 * reported on reload; `/json` answers 413 past its bound; and a shutdown with stalled clients
 * ends within its grace period (in-process, `shutdownGraceMs`).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { createRateLimitService } from '../../src/serve/index.js';
import { useRedis } from '../helpers/redis.js';
import {
  configDir,
  http,
  request,
  rlsClient,
  type ServeProcess,
  startServe,
} from '../helpers/serve.js';
import { aliasBomb } from '../helpers/yaml-bomb.js';

const RULES = `
domain: trial
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: dm
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 5 }
`;
const ALIASES = `
domain: aliased
descriptors:
  - key: k
    rate_limit: &std { unit: minute, requests_per_unit: 3 }
${Array.from({ length: 200 }, (_, i) => `  - key: alias${i}\n    rate_limit: *std\n`).join('')}`;
const ZERO = `
domain: zero
descriptors:
  - key: zero
    rate_limit: { unit: hour, requests_per_unit: 0 }
  - key: none
    rate_limit: { unit: hour }
`;

const redis = useRedis();
let serve: ServeProcess;
let dir: string;
let client: ReturnType<typeof rlsClient>;
const fresh = () => randomUUID().slice(0, 8);
const weighted = (value: string, hits: number) => ({
  domain: 'trial',
  descriptors: [{ entries: [{ key: 'k', value }], hits_addend: { value: hits } }],
});
const seconds = (d: { seconds: string } | null) => Number(d?.seconds ?? 0);

describe('sluice serve: the trial findings', () => {
  before(async () => {
    dir = configDir({ 'trial.yaml': RULES });
    serve = await startServe(dir, redis.server.url);
    client = rlsClient(serve.grpcPort);
  });

  /** Writes a rule file, and waits until the service serves `files` files. */
  const add = async (name: string, text: string, files: number) => {
    writeFileSync(join(dir, name), text);
    await serve.waitFor(new RegExp(`loaded \\d+ rules from ${files} files`), 10_000);
  };

  it('a file anchoring a rate_limit used 200 times loads', async () => {
    await add('aliases.yaml', ALIASES, 2);
    const r = await client.should(request('aliased', ['alias150=x']));
    assert.equal(r.statuses[0]?.current_limit?.requests_per_unit, 3);
  });

  it('a refused request reports the state after its charge (remaining 0, the real reset)', async () => {
    const v = fresh();
    const first = await client.should(weighted(v, 2));
    assert.deepEqual([first.overall_code, first.statuses[0]?.limit_remaining], ['OK', 1]);
    const second = await client.should(weighted(v, 2));
    assert.equal(second.overall_code, 'OVER_LIMIT');
    assert.equal(second.statuses[0]?.limit_remaining, 0);
    assert.ok(seconds(second.statuses[0]?.duration_until_reset ?? null) >= 55);
    // A cost that can never fit, on a fresh scope: charged (the window filled), and said so.
    const big = await client.should(weighted(fresh(), 4));
    assert.equal(big.overall_code, 'OVER_LIMIT');
    assert.equal(big.statuses[0]?.limit_remaining, 0);
    assert.ok(seconds(big.statuses[0]?.duration_until_reset ?? null) >= 55);
  });

  it('requests_per_unit 0 or none: every request over, nothing stored', async () => {
    await add('zero.yaml', ZERO, 3);
    const admin = await redis.admin();
    const keys = await admin.client.dbSize();
    const r = await client.should(request('zero', [`zero=${fresh()}`], [`none=${fresh()}`]));
    assert.equal(r.overall_code, 'OVER_LIMIT');
    assert.deepEqual(
      r.statuses.map((s) => [s.code, s.limit_remaining, s.current_limit?.requests_per_unit]),
      [
        ['OVER_LIMIT', 0, 0],
        ['OVER_LIMIT', 0, 0],
      ],
    );
    assert.ok(seconds(r.statuses[0]?.duration_until_reset ?? null) > 0);
    assert.equal(await admin.client.dbSize(), keys);
  });

  it('a deny-all rule refuses the request: its other descriptors spend nothing', async () => {
    await add(
      'zero2.yaml',
      ZERO.replace('domain: zero', 'domain: zero2').concat(
        '  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 2 }\n',
      ),
      4,
    );
    const v = fresh();
    const refused = await client.should(request('zero2', [`zero=${v}`], [`k=${v}`]));
    assert.equal(refused.overall_code, 'OVER_LIMIT');
    const after = await client.should(request('zero2', [`k=${v}`]));
    assert.deepEqual([after.overall_code, after.statuses[0]?.limit_remaining], ['OK', 1]);
  });

  it('an unknown domain: OK with no limit, its overrides ignored', async () => {
    const overridden = {
      domain: `nodomain-${fresh()}`,
      descriptors: [
        { entries: [{ key: 'zz', value: 'ov' }], limit: { requests_per_unit: 1, unit: 'HOUR' } },
      ],
    };
    for (let i = 0; i < 2; i++) {
      const r = await client.should(overridden);
      assert.equal(r.overall_code, 'OK');
      assert.equal(r.statuses[0]?.current_limit, null);
    }
  });

  it('override keys are injective: k_v="" and k="v" are two counters', async () => {
    const limit = { requests_per_unit: 5, unit: 'HOUR' };
    const v = fresh();
    const one = { entries: [{ key: `k_${v}`, value: '' }], limit };
    const two = { entries: [{ key: 'k', value: v }], limit };
    const a = await client.should({ domain: 'trial', descriptors: [one] });
    const b = await client.should({ domain: 'trial', descriptors: [two] });
    assert.deepEqual([a.statuses[0]?.limit_remaining, b.statuses[0]?.limit_remaining], [4, 4]);
  });

  it('a descriptor too long for a key is named by its index', async () => {
    // Under the 64 KiB message cap (RESOURCE_EXHAUSTED), yet too long as a key: a control
    // character takes 1 byte on the wire and 6 characters in the key's JSON (\u0001).
    const long = '\u0001'.repeat(12_000);
    await assert.rejects(
      client.should(request('trial', ['k=a'], [`k=${long}`])),
      (error: { code: number; details: string }) => {
        assert.equal(error.code, 2); // UNKNOWN
        assert.match(error.details, /^descriptors\[1\]: .*at most 65536$/);
        return true;
      },
    );
  });

  it('metric labels: unknown domains and overrides under fixed values, detailed_metric values', async () => {
    const domain = `secret-${fresh()}`;
    const value = `ov${fresh()}`;
    await client.should(request(domain, ['a=b']));
    await client.should({
      domain: 'trial',
      descriptors: [
        { entries: [{ key: 'k', value }], limit: { requests_per_unit: 9, unit: 'HOUR' } },
      ],
    });
    const detail = `dm${fresh()}`;
    await client.should(request('trial', [`dm=${detail}`]));
    const text = (await http(serve.httpPort, '/metrics')).text;
    assert.doesNotMatch(text, new RegExp(`${domain}|${value}`));
    assert.match(text, /domain="\(unknown\)",key="",outcome="no_rule"/);
    assert.match(text, /domain="trial",key="\(override\)",outcome="ok"/);
    assert.match(text, new RegExp(`key="trial\\.dm_${detail}"`));
  });

  it('POST /json past 1 MiB: 413', async () => {
    const r = await http(serve.httpPort, '/json', { domain: 'trial', pad: 'x'.repeat(1_100_000) });
    assert.equal(r.status, 413);
  });

  it('a file past the alias bound, added on reload: reported with its name, counted', async () => {
    const laughs = aliasBomb();
    writeFileSync(join(dir, 'bomb.yaml'), `${laughs}\ndomain: bomb\n`);
    await serve.waitFor(/bomb\.yaml: \(document\): not valid YAML/, 10_000);
    const text = (await http(serve.httpPort, '/metrics')).text;
    assert.match(text, /sluice_serve_config_error 1/);
    assert.match(text, /sluice_serve_config_reloads_total\{result="error"\} 1/);
  });
});

describe('sluice serve: environment errors', () => {
  it('name the variable', async () => {
    await assert.rejects(
      startServe(configDir({ 'a.yaml': RULES }), redis.server.url, [], {
        SLUICE_MAX_IN_FLIGHT: 'abc',
      }),
      /SLUICE_MAX_IN_FLIGHT must be an integer/,
    );
  });
});

describe('sluice serve: shutdown with stalled clients', () => {
  it('ends within its grace period: stalled HTTP bodies and gRPC prefaces are cut', async () => {
    const client = await redis.client();
    const service = await createRateLimitService({
      client,
      config: configDir({ 'a.yaml': 'domain: a\ndescriptors: []\n' }),
      host: '127.0.0.1',
      grpcPort: 0,
      httpPort: 0,
      shutdownGraceMs: 300,
      log: () => {},
    });
    const sockets = [
      connect(service.httpPort, '127.0.0.1', function (this: ReturnType<typeof connect>) {
        this.write('POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"dom');
      }),
      connect(service.grpcPort, '127.0.0.1', function (this: ReturnType<typeof connect>) {
        this.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
      }),
    ];
    for (const s of sockets) s.on('error', () => {});
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = Date.now();
    await service.close();
    const took = Date.now() - started;
    for (const s of sockets) s.destroy();
    assert.ok(took < 2000, `close() took ${took} ms`);
  });
});
