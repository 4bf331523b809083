import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { limitedResponse, retryAfterSeconds, unavailableResponse } from 'sluice/http';

describe('Retry-After (RFC 9110 §10.2.3): whole seconds, rounded up, at least 1', () => {
  const table: [number, number][] = [
    [1, 1],
    [999, 1],
    [1000, 1],
    [1001, 2],
    [1500, 2],
    [2000, 2],
    [59_999, 60],
    [0, 1],
    [-5, 1],
    [Number.NaN, 1],
  ];
  for (const [ms, seconds] of table) {
    it(`${ms} ms → ${seconds}`, () => assert.equal(retryAfterSeconds(ms), seconds));
  }

  it('case C07: over 1,000 random delays the header is an integer ≥ 1 and never rounds down', () => {
    for (let i = 0; i < 1000; i++) {
      const ms = 1 + Math.floor(Math.random() * 120_000);
      const header = limitedResponse({
        allowed: false,
        remaining: 0,
        limit: 1,
        resetMs: ms - 1,
        retryAfterMs: ms,
      }).headers['retry-after'];
      const value = Number(header);
      assert.ok(Number.isInteger(value) && value >= 1, `Retry-After ${header}`);
      assert.ok(value * 1000 >= ms, `${value} s is shorter than ${ms} ms`);
      assert.ok((value - 1) * 1000 < ms, `${value} s is not the smallest whole number of seconds`);
    }
  });
});

describe('HTTP mapping', () => {
  it('a denial is 429 with Retry-After and a JSON body', () => {
    const spec = limitedResponse({
      allowed: false,
      remaining: 0,
      limit: 10,
      resetMs: 400,
      retryAfterMs: 401,
    });
    assert.equal(spec.status, 429);
    assert.equal(spec.headers['retry-after'], '1');
    assert.equal(JSON.parse(spec.body).error, 'rate_limited');
  });

  it('case C06: a cost that can never fit is 429 without a misleading Retry-After', () => {
    const spec = limitedResponse({
      allowed: false,
      remaining: 5,
      limit: 10,
      resetMs: 0,
      retryAfterMs: Infinity,
    });
    assert.equal(spec.status, 429);
    assert.equal(spec.headers['retry-after'], undefined);
    assert.equal(JSON.parse(spec.body).error, 'cost_exceeds_limit');
  });

  it('a limiter failure is 503 with Retry-After: 1, never 429', () => {
    const spec = unavailableResponse();
    assert.equal(spec.status, 503);
    assert.equal(spec.headers['retry-after'], '1');
  });
});
