import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { gcra } from '../../src/algorithms/gcra.js';
import { slidingWindowLog } from '../../src/algorithms/sliding-window-log.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';
import { rateLimitHeaders } from '../../src/http/core.js';

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
