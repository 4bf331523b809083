import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, gcra, slidingWindowCounter, slidingWindowLog, tokenBucket } from 'sluice';
import { rateLimitHeaderList, rateLimitHeaders } from 'sluice/http';
import { MAX_LIMIT, MAX_WINDOW_MS } from '../../src/algorithms/policy.js';

describe('rate-limit headers for every policy', () => {
  it('w is the quota window in seconds: the window, or the time a full burst takes to return', () => {
    const w = (p: { quotaWindowMs: number }) =>
      rateLimitHeaders(
        { allowed: true, remaining: 1, limit: 2, resetMs: 1, retryAfterMs: 0 },
        'r',
        p.quotaWindowMs,
      )['ratelimit-policy'];
    assert.equal(w(fixedWindow({ limit: 2, windowMs: 1500 })), '"r";q=2;w=2');
    assert.equal(w(slidingWindowLog({ limit: 2, windowMs: 60_000 })), '"r";q=2;w=60');
    assert.equal(
      w(tokenBucket({ capacity: 20, refillTokens: 5, refillIntervalMs: 1000 })),
      '"r";q=2;w=4',
    );
    assert.equal(w(gcra({ limit: 5, periodMs: 1000, burst: 20 })), '"r";q=2;w=4');
  });

  it('a denial’s reset is the Retry-After instant; a never-fitting cost keeps the window reset', () => {
    const denied = rateLimitHeaders(
      { allowed: false, remaining: 0, limit: 5, resetMs: 999, retryAfterMs: 1000 },
      'r',
      1000,
    );
    assert.equal(denied.ratelimit, '"r";r=0;t=1');
    const never = rateLimitHeaders(
      { allowed: false, remaining: 3, limit: 5, resetMs: 2500, retryAfterMs: Infinity },
      'r',
      1000,
    );
    assert.equal(never.ratelimit, '"r";r=3;t=3');
  });

  it('policy names are quoted Structured Field strings, with unsafe characters replaced', () => {
    const h = rateLimitHeaders(
      { allowed: true, remaining: 0, limit: 1, resetMs: 0, retryAfterMs: 0 },
      'GET/a"b\\c\u00e9',
      1000,
    );
    assert.equal(h['ratelimit-policy'], '"GET/a_b_c_";q=1;w=1');
  });
});

/** RFC 8941: an sf-string item with integer parameters, as this module writes them. */
const ITEM = /^"[\x20-\x21\x23-\x5b\x5d-\x7e]*"(;[a-z]+=-?\d{1,15})+$/;

describe('rate-limit headers are valid Structured Fields at every accepted parameter', () => {
  it('the largest limits, windows and bursts the builders accept give integers of at most 15 digits', () => {
    // Each builder at its largest limit, and at its longest window (products ≤ 2^53 − 1).
    const longest = Math.floor(Number.MAX_SAFE_INTEGER / MAX_WINDOW_MS);
    const extremes = [
      fixedWindow({ limit: MAX_LIMIT, windowMs: 9 }),
      fixedWindow({ limit: longest, windowMs: MAX_WINDOW_MS }),
      slidingWindowLog({ limit: 10_000, windowMs: MAX_WINDOW_MS }),
      slidingWindowCounter({ limit: MAX_LIMIT, windowMs: 4 }),
      slidingWindowCounter({ limit: Math.floor(longest / 2), windowMs: MAX_WINDOW_MS }),
      tokenBucket({ capacity: longest, refillTokens: 1, refillIntervalMs: MAX_WINDOW_MS }),
      tokenBucket({ capacity: MAX_LIMIT, refillTokens: 1, refillIntervalMs: 9 }),
      gcra({ limit: 1, periodMs: 1000, burst: 2_000_000_000 }),
      gcra({ limit: MAX_LIMIT, periodMs: MAX_WINDOW_MS, burst: MAX_LIMIT }),
    ];
    for (const policy of extremes) {
      const decision = {
        allowed: false,
        remaining: policy.limit,
        limit: policy.limit,
        resetMs: policy.horizonMs,
        retryAfterMs: policy.horizonMs,
      };
      const headers = rateLimitHeaders(decision, policy.name, policy.quotaWindowMs, {
        legacy: true,
      });
      for (const field of ['ratelimit-policy', 'ratelimit'] as const) {
        assert.match(headers[field] ?? '', ITEM, `${policy.name} ${field}: ${headers[field]}`);
      }
      for (const field of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
        assert.match(headers[field] ?? '', /^\d{1,15}$/, `${policy.name} ${field}`);
      }
    }
  });

  it('the issue’s 2^50 is refused at build time, never advertised as 16 digits', () => {
    assert.throws(() => fixedWindow({ limit: 2 ** 50, windowMs: 1000 }), /policy\.limit/);
  });
});

describe('windows that are not whole seconds', () => {
  const policyHeader = (limit: number, quotaWindowMs: number) =>
    rateLimitHeaderList([{ name: 'p', limit, quotaWindowMs }])['ratelimit-policy'];

  it('are advertised at their rate over w: 3 per 100 ms is q=30;w=1, never 3 per second', () => {
    assert.equal(policyHeader(3, 100), '"p";q=30;w=1');
    assert.equal(policyHeader(3, 1500), '"p";q=4;w=2');
    assert.equal(policyHeader(7, 999), '"p";q=7;w=1');
    assert.equal(policyHeader(3, 60_000), '"p";q=3;w=60');
  });
});

describe('several policies: the draft’s List syntax', () => {
  const allowed = (remaining: number, resetMs: number) => ({
    allowed: true,
    remaining,
    limit: 10,
    resetMs,
    retryAfterMs: 0,
  });

  it('one item per policy, in order; RateLimit only for decided policies', () => {
    const headers = rateLimitHeaderList([
      { name: 'burst', limit: 10, quotaWindowMs: 1000, decision: allowed(3, 400) },
      { name: 'daily', limit: 1000, quotaWindowMs: 86_400_000 },
    ]);
    assert.equal(headers['ratelimit-policy'], '"burst";q=10;w=1, "daily";q=1000;w=86400');
    assert.equal(headers.ratelimit, '"burst";r=3;t=1');
  });

  it('legacy X-RateLimit-* tell the most restrictive policy: the longest wait, else the fewest left', () => {
    const denied = { allowed: false, remaining: 0, limit: 5, resetMs: 100, retryAfterMs: 7000 };
    const both = rateLimitHeaderList(
      [
        { name: 'a', limit: 10, quotaWindowMs: 1000, decision: allowed(1, 500) },
        { name: 'b', limit: 5, quotaWindowMs: 60_000, decision: denied },
      ],
      { legacy: true, standard: false },
    );
    assert.deepEqual(both, {
      'x-ratelimit-limit': '5',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '7',
    });
    const fewest = rateLimitHeaderList(
      [
        { name: 'a', limit: 10, quotaWindowMs: 1000, decision: allowed(4, 500) },
        { name: 'b', limit: 10, quotaWindowMs: 1000, decision: allowed(2, 900) },
      ],
      { legacy: true, standard: false },
    );
    assert.equal(fewest['x-ratelimit-remaining'], '2');
  });

  it('a policy that would have fitted in a refused takeAll reports its window reset, not Retry-After', () => {
    const fitted = { allowed: false, remaining: 4, limit: 10, resetMs: 30_000, retryAfterMs: 0 };
    const headers = rateLimitHeaderList([
      { name: 'x', limit: 10, quotaWindowMs: 60_000, decision: fitted },
    ]);
    assert.equal(headers.ratelimit, '"x";r=4;t=30');
  });
});

describe('RateLimit t: seconds until additional quota (draft -10 §4.1.2)', () => {
  const bucket = tokenBucket({ capacity: 100, refillTokens: 10, refillIntervalMs: 60_000 });
  const t = (policy: Parameters<typeof rateLimitHeaderList>[0][0]['policy'], decision: object) =>
    rateLimitHeaderList([
      {
        name: 'r',
        limit: 100,
        quotaWindowMs: 1000,
        decision: {
          allowed: true,
          remaining: 0,
          limit: 100,
          resetMs: 0,
          retryAfterMs: 0,
          ...decision,
        },
        ...(policy ? { policy } : {}),
      },
    ]).ratelimit;

  it('token bucket and GCRA: the next unit; without the policy, the clean state', () => {
    // One token per 6 s; 50 missing: full in 300 s, the next token in 6 s.
    assert.equal(t(bucket, { remaining: 50, resetMs: 300_000 }), '"r";r=50;t=6');
    assert.equal(t(undefined, { remaining: 50, resetMs: 300_000 }), '"r";r=50;t=300');
    const cell = gcra({ limit: 10, periodMs: 60_000, burst: 100 });
    assert.equal(t(cell, { remaining: 95, resetMs: 30_000 }), '"r";r=95;t=6');
    // A full quota has nothing more to come.
    assert.equal(t(bucket, { remaining: 100, resetMs: 0 }), '"r";r=100;t=0');
  });

  it('a denial of a large cost: the next unit, never later than Retry-After (§6)', () => {
    // 2 tokens left, a cost of 5: Retry-After in 18 s, the next token in 6 s.
    const denied = { allowed: false, remaining: 2, resetMs: 588_000, retryAfterMs: 18_000 };
    assert.equal(t(bucket, denied), '"r";r=2;t=6');
    // A fixed window gives every unit back at once: the Retry-After instant.
    const window = fixedWindow({ limit: 100, windowMs: 60_000 });
    assert.equal(t(window, { ...denied, resetMs: 17_999 }), '"r";r=2;t=18');
  });
});
