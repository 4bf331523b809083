/**
 * `sluice serve` through a real gRPC client, the servers in processes of their own on one
 * private Redis: the reference's matching rules, all-or-nothing against the reference's
 * counting (`--compat reference`), hits_addend precedence and 0, overrides, unlimited, shadow
 * modes, replaces, quota_mode, response headers, errors, health, `/json` and `/metrics`.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { useRedis } from '../helpers/redis.js';
import {
  configDir,
  grpc,
  http,
  request,
  rlsClient,
  startServe,
  type TestRequest,
} from '../helpers/serve.js';

const RULES = `
domain: shop
descriptors:
  - key: k
    value: exact
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: k
    value: "pre*"
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: shared
    value: "s*"
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 100 }
    descriptors:
      - key: path
        rate_limit: { unit: minute, requests_per_unit: 2, name: per-path }
  - key: free
    rate_limit: { unlimited: true }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: quota
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: old
    rate_limit: { unit: minute, requests_per_unit: 1, name: old-limit }
  - key: new
    rate_limit: { unit: minute, requests_per_unit: 5, replaces: [{ name: old-limit }] }
  - key: a
    rate_limit: { unit: minute, requests_per_unit: 1 }
    descriptors:
      - key: c
        rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: b
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: tb
    rate_limit: { unit: second, requests_per_unit: 2, algorithm: token-bucket }
  - key: swl
    rate_limit: { unit: minute, requests_per_unit: 5, algorithm: sliding-window-log }
`;

const redis = useRedis();
type Client = ReturnType<typeof rlsClient>;
let sluice: Client;
let reference: Client;
let shadow: Client;
let httpPort = 0;

/** A value no other test uses. */
const fresh = () => randomUUID().slice(0, 8);
const codes = async (client: Client, req: TestRequest) =>
  (await client.should(req)).statuses.map((s) => s.code);

describe('sluice serve over gRPC', () => {
  before(async () => {
    const dir = configDir({ 'shop.yaml': RULES });
    const url = redis.server.url;
    const [a, b, c] = await Promise.all([
      startServe(dir, url, [], { LIMIT_RESPONSE_HEADERS_ENABLED: 'true' }),
      startServe(dir, url, ['--compat', 'reference']),
      startServe(dir, url, [], { SHADOW_MODE: 'true' }),
    ]);
    sluice = rlsClient(a.grpcPort);
    reference = rlsClient(b.grpcPort);
    shadow = rlsClient(c.grpcPort);
    httpPort = a.httpPort;
  });

  describe('sluice serve: matching rules', () => {
    it('exact key+value, then wildcards in order, then the value-less key', async () => {
      const r = await sluice.should(request('shop', ['k=exact'], ['k=pre-x'], [`k=${fresh()}`]));
      assert.deepEqual(
        r.statuses.map((s) => s.current_limit?.requests_per_unit),
        [2, 3, 1],
      );
    });

    it('a value-less key counts each runtime value apart; share_threshold shares the wildcard', async () => {
      const [x, y] = [fresh(), fresh()];
      assert.deepEqual(await codes(sluice, request('shop', [`k=${x}`], [`k=${y}`])), ['OK', 'OK']);
      assert.deepEqual(await codes(sluice, request('shop', [`k=${x}`])), ['OVER_LIMIT']);
      const p = `pre${fresh()}`;
      for (let i = 0; i < 3; i++) await sluice.should(request('shop', [`k=${p}`]));
      assert.deepEqual(await codes(sluice, request('shop', [`k=${p}`])), ['OVER_LIMIT']);
      assert.deepEqual(await codes(sluice, request('shop', [`k=pre${fresh()}`])), ['OK']);
      // shared=s…: every value matching s* shares one counter of 2.
      const s = `s${fresh()}`;
      assert.deepEqual(await codes(sluice, request('shop', [`shared=${s}1`], [`shared=${s}2`])), [
        'OK',
        'OK',
      ]);
      const third = await sluice.should(request('shop', [`shared=${s}3`]));
      assert.equal(third.statuses[0]?.code, 'OVER_LIMIT');
    });

    it('a limit applies at the level of the last entry; no rule, no limit', async () => {
      const t = fresh();
      const r = await sluice.should(
        request('shop', [`tenant=${t}`], [`tenant=${t}`, 'path=/a'], ['path=/a'], ['nope=1']),
      );
      assert.equal(r.statuses[0]?.current_limit?.requests_per_unit, 100);
      assert.equal(r.statuses[1]?.current_limit?.name, 'per-path');
      assert.equal(r.statuses[2]?.current_limit, null);
      assert.equal(r.statuses[3]?.current_limit, null);
      assert.equal(r.statuses[2]?.code, 'OK');
      const other = await sluice.should(request('elsewhere', ['k=exact']));
      assert.equal(other.overall_code, 'OK');
      assert.equal(other.statuses[0]?.current_limit, null);
    });

    it('descriptors are counted apart structurally: [a="x.c_"] is not [a=x, c=""]', async () => {
      const v = fresh();
      assert.equal((await sluice.should(request('shop', [`a=${v}.c_`]))).overall_code, 'OK');
      assert.equal((await sluice.should(request('shop', [`a=${v}`, 'c']))).overall_code, 'OK');
    });

    it('algorithm: token-bucket (sluice extension)', async () => {
      const v = fresh();
      const r = await sluice.should(request('shop', [`tb=${v}`], [`tb=${v}x`]));
      assert.equal(r.statuses[0]?.current_limit?.unit, 'SECOND');
      await sluice.should(request('shop', [`tb=${v}`]));
      assert.equal((await sluice.should(request('shop', [`tb=${v}`]))).overall_code, 'OVER_LIMIT');
    });
  });

  describe('sluice serve: counting', () => {
    it('sluice: a refused request spends no quota that did not refuse it', async () => {
      const v = fresh();
      const req = request('shop', [`a=${v}`], [`b=${v}`]);
      const first = await sluice.should(req);
      assert.equal(first.overall_code, 'OK');
      assert.equal(first.statuses[1]?.limit_remaining, 4);
      const second = await sluice.should(req);
      assert.equal(second.overall_code, 'OVER_LIMIT');
      assert.deepEqual(
        second.statuses.map((s) => s.code),
        ['OVER_LIMIT', 'OK'],
      );
      const check = await sluice.should({
        domain: 'shop',
        descriptors: [{ entries: [{ key: 'b', value: v }], hits_addend: { value: 0 } }],
      });
      assert.equal(check.statuses[0]?.limit_remaining, 4, 'b untouched by the refused request');
      // sluice's windows start at the first hit.
      const reset = Number(first.statuses[0]?.duration_until_reset?.seconds);
      assert.ok(reset >= 59 && reset <= 60, `reset ${reset}`);
    });

    it('a fresh scope reports its window’s time to reset, as a hit does (not 0)', async () => {
      const ms = (d: { seconds: string; nanos: number } | null | undefined) =>
        d === null || d === undefined ? 0 : Number(d.seconds) * 1000 + d.nanos / 1e6;
      const [x, y, z] = [fresh(), fresh(), fresh()];
      // A check (hits_addend 0) of a scope never hit: the minute a first hit starts.
      const check = await sluice.should({
        domain: 'shop',
        descriptors: [{ entries: [{ key: 'b', value: x }], hits_addend: { value: 0 } }],
      });
      assert.equal(check.statuses[0]?.limit_remaining, 5);
      assert.equal(ms(check.statuses[0]?.duration_until_reset), 60_000);
      // A fresh descriptor of a refused request (nothing spent on it), refused by Redis…
      await sluice.should(request('shop', [`a=${y}`]));
      const refused = await sluice.should(request('shop', [`a=${y}`], [`b=${y}`]));
      assert.deepEqual(
        refused.statuses.map((s) => s.code),
        ['OVER_LIMIT', 'OK'],
      );
      assert.equal(ms(refused.statuses[1]?.duration_until_reset), 60_000);
      // … and by the limiter's local denial cache (the over scope known to be over).
      const again = await sluice.should(request('shop', [`a=${y}`], [`b=${z}`]));
      assert.equal(again.overall_code, 'OVER_LIMIT');
      assert.equal(ms(again.statuses[1]?.duration_until_reset), 60_000);
      // The first hit itself: its window, then less as it runs.
      const first = await sluice.should(request('shop', [`b=${x}`]));
      const reset = ms(first.statuses[0]?.duration_until_reset);
      assert.ok(reset > 55_000 && reset <= 60_000, `first hit: reset ${reset} ms`);
      // The header of the tightest descriptor says the same, in seconds.
      const header = check.response_headers_to_add.find((h) => h.key === 'RateLimit-Reset');
      assert.equal(header?.value, '60');
    });

    it('--compat reference: every matched descriptor incremented, clock-aligned windows', async () => {
      const v = fresh();
      const req = request('shop', [`a=${v}`], [`b=${v}`]);
      await reference.should(req);
      const second = await reference.should(req);
      assert.equal(second.overall_code, 'OVER_LIMIT');
      assert.equal(second.statuses[1]?.code, 'OK');
      assert.equal(second.statuses[1]?.limit_remaining, 3, 'b incremented by the refused request');
      const d = second.statuses[0]?.duration_until_reset as { seconds: string; nanos: number };
      const ms = Number(d.seconds) * 1000 + d.nanos / 1e6;
      const toBoundary = 60_000 - (Date.now() % 60_000);
      assert.ok(Math.abs(ms - toBoundary) < 2000, `reset ${ms} ms, boundary in ${toBoundary} ms`);
    });
  });

  describe('sluice serve: hits_addend, overrides, unlimited, shadow, replaces, quota', () => {
    it('the descriptor hits_addend wins over the request’s; 0 checks only', async () => {
      const v = fresh();
      const b = (hits?: number) => ({
        entries: [{ key: 'b', value: v }],
        ...(hits === undefined ? {} : { hits_addend: { value: hits } }),
      });
      let r = await sluice.should({ domain: 'shop', descriptors: [b()], hits_addend: 3 });
      assert.equal(r.statuses[0]?.limit_remaining, 2);
      r = await sluice.should({ domain: 'shop', descriptors: [b(1)], hits_addend: 3 });
      assert.equal(r.statuses[0]?.limit_remaining, 1);
      r = await sluice.should({ domain: 'shop', descriptors: [b(0)] });
      assert.equal(r.statuses[0]?.limit_remaining, 1);
      assert.equal(r.statuses[0]?.code, 'OK');
      r = await sluice.should({ domain: 'shop', descriptors: [b()], hits_addend: 2 });
      assert.equal(r.overall_code, 'OVER_LIMIT');
      r = await sluice.should({ domain: 'shop', descriptors: [b(0)] });
      // The debit of 2 that went over (1 left) still counts: charged up to the full window.
      assert.equal(r.statuses[0]?.limit_remaining, 0, 'the refused debit was charged');
      assert.equal(r.statuses[0]?.code, 'OVER_LIMIT', 'check only: no unit left');
    });

    it('a sliding window log: a debit that goes over is charged, as on the other algorithms', async () => {
      const v = fresh();
      const d = (hits: number) => ({
        entries: [{ key: 'swl', value: v }],
        hits_addend: { value: hits },
      });
      let r = await sluice.should({ domain: 'shop', descriptors: [d(3)] });
      assert.equal(r.statuses[0]?.code, 'OK');
      assert.equal(r.statuses[0]?.limit_remaining, 2);
      // A debit of 3 with 2 left: refused, and still counted — the log filled to its limit.
      r = await sluice.should({ domain: 'shop', descriptors: [d(3)] });
      assert.equal(r.overall_code, 'OVER_LIMIT');
      assert.equal(r.statuses[0]?.limit_remaining, 0, 'the charge’s remaining');
      const reset = r.statuses[0]?.duration_until_reset?.seconds;
      assert.ok(Number(reset) > 0 && Number(reset) <= 60, `reset ${String(reset)}`);
      r = await sluice.should({ domain: 'shop', descriptors: [d(0)] });
      assert.equal(r.statuses[0]?.limit_remaining, 0, 'the refused debit was charged');
      assert.equal(r.statuses[0]?.code, 'OVER_LIMIT', 'check only: no unit left');
      // A debit above the limit itself fills a fresh log's window too.
      const w = fresh();
      const e = (hits: number) => ({
        entries: [{ key: 'swl', value: w }],
        hits_addend: { value: hits },
      });
      r = await sluice.should({ domain: 'shop', descriptors: [e(7)] });
      assert.equal(r.overall_code, 'OVER_LIMIT');
      r = await sluice.should({ domain: 'shop', descriptors: [e(1)] });
      assert.equal(r.overall_code, 'OVER_LIMIT', 'the window is full');
    });

    it('the request’s limit override replaces the configured limit', async () => {
      const d = {
        entries: [{ key: 'a', value: fresh() }],
        limit: { requests_per_unit: 2, unit: 'HOUR' },
      };
      const r = await sluice.should({ domain: 'shop', descriptors: [d] });
      assert.deepEqual(r.statuses[0]?.current_limit, {
        requests_per_unit: 2,
        unit: 'HOUR',
        name: '',
      });
      await sluice.should({ domain: 'shop', descriptors: [d] });
      assert.equal(
        (await sluice.should({ domain: 'shop', descriptors: [d] })).overall_code,
        'OVER_LIMIT',
      );
    });

    it('unlimited answers limit_remaining 4294967295', async () => {
      const r = await sluice.should(request('shop', [`free=${fresh()}`]));
      assert.equal(r.statuses[0]?.limit_remaining, 4_294_967_295);
      assert.equal(r.statuses[0]?.code, 'OK');
    });

    it('shadow_mode: over its limit it answers OK, and it refuses nothing else', async () => {
      const v = fresh();
      await sluice.should(request('shop', [`shadow=${v}`]));
      const r = await sluice.should(request('shop', [`shadow=${v}`], [`b=${v}`]));
      assert.equal(r.overall_code, 'OK');
      assert.deepEqual(
        r.statuses.map((s) => s.code),
        ['OK', 'OK'],
      );
      assert.equal(r.statuses[1]?.limit_remaining, 4);
      const metrics = await http(httpPort, '/metrics');
      assert.match(metrics.text, /key="shop\.shadow",outcome="shadow_over_limit"} [1-9]/);
    });

    it('SHADOW_MODE (global): every answer OK, but for a request’s own override', async () => {
      const v = fresh();
      await shadow.should(request('shop', [`a=${v}`]));
      const r = await shadow.should(request('shop', [`a=${v}`]));
      assert.equal(r.overall_code, 'OK');
      assert.equal(r.statuses[0]?.code, 'OVER_LIMIT');
      const d = {
        entries: [{ key: 'a', value: fresh() }],
        limit: { requests_per_unit: 1, unit: 'HOUR' },
      };
      await shadow.should({ domain: 'shop', descriptors: [d] });
      assert.equal(
        (await shadow.should({ domain: 'shop', descriptors: [d] })).overall_code,
        'OVER_LIMIT',
      );
    });

    it('quota_mode: over its limit the request passes, the violation in dynamic_metadata', async () => {
      const v = fresh();
      const first = await sluice.should(request('shop', [`b=${v}`], [`quota=${v}`]));
      assert.ok(first.dynamic_metadata);
      const r = await sluice.should(request('shop', [`b=${v}`], [`quota=${v}`]));
      assert.equal(r.overall_code, 'OK');
      const fields = r.dynamic_metadata?.fields as Record<string, Record<string, unknown>>;
      assert.equal(fields.quotaModeEnabled?.boolValue, true);
      const list = fields.quotaModeViolations?.listValue as { values: { numberValue: number }[] };
      assert.deepEqual(
        list.values.map((x) => x.numberValue),
        [1],
      );
    });

    it('replaces: a matched rule drops the rule it names', async () => {
      const v = fresh();
      for (let i = 0; i < 3; i++) {
        const r = await sluice.should(request('shop', [`old=${v}`], [`new=${v}`]));
        assert.equal(r.overall_code, 'OK');
        assert.equal(r.statuses[0]?.current_limit, null);
      }
      await sluice.should(request('shop', [`old=${v}`]));
      assert.equal((await sluice.should(request('shop', [`old=${v}`]))).overall_code, 'OVER_LIMIT');
    });

    it('LIMIT_RESPONSE_HEADERS_ENABLED: the tightest descriptor’s limit, remaining and reset', async () => {
      const v = fresh();
      const r = await sluice.should(request('shop', [`b=${v}`], [`a=${v}`]));
      assert.deepEqual(r.response_headers_to_add, [
        { key: 'RateLimit-Limit', value: '1', raw_value: Buffer.alloc(0) },
        { key: 'RateLimit-Remaining', value: '0', raw_value: Buffer.alloc(0) },
        { key: 'RateLimit-Reset', value: '60', raw_value: Buffer.alloc(0) },
      ]);
    });
  });

  describe('sluice serve: errors, health, HTTP', () => {
    it('an empty domain or descriptor list is a gRPC error with a clear message', async () => {
      await assert.rejects(sluice.should(request('', ['a=1'])), (error: grpc.ServiceError) => {
        assert.equal(error.code, grpc.status.UNKNOWN);
        assert.match(error.details, /domain must not be empty/);
        return true;
      });
      await assert.rejects(sluice.should({ domain: 'shop', descriptors: [] }), /descriptor list/);
    });

    it('health: grpc.health.v1 SERVING for "ratelimit", /healthcheck 200 OK', async () => {
      assert.equal((await sluice.check()).status, 'SERVING');
      assert.equal((await sluice.check('')).status, 'SERVING');
      await assert.rejects(sluice.check('other'), { code: grpc.status.NOT_FOUND });
      assert.deepEqual(await http(httpPort, '/healthcheck'), { status: 200, text: 'OK' });
    });

    it('POST /json: protojson in and out, 429 when over the limit', async () => {
      const v = fresh();
      const body = { domain: 'shop', descriptors: [{ entries: [{ key: 'a', value: v }] }] };
      const ok = await http(httpPort, '/json', body);
      assert.equal(ok.status, 200);
      const json = JSON.parse(ok.text);
      assert.equal(json.overallCode, 'OK');
      assert.deepEqual(json.statuses[0].currentLimit, { requestsPerUnit: 1, unit: 'MINUTE' });
      const over = await http(httpPort, '/json', { ...body, hitsAddend: 1 });
      assert.equal(over.status, 429);
      assert.equal(JSON.parse(over.text).overallCode, 'OVER_LIMIT');
      assert.equal((await http(httpPort, '/json', { domain: '' })).status, 400);
      const metrics = await http(httpPort, '/metrics');
      assert.match(metrics.text, /sluice_serve_requests_total\{result="over_limit"\} [1-9]/);
      assert.match(metrics.text, /sluice_serve_redis_up 1/);
    });
  });
});
