/**
 * An error of another copy of sluice in the same process — a bundler's chunk, a second
 * version in node_modules — is not an instance of this copy's classes. `isSluiceError` tells
 * it by its code, so the HTTP guard answers a programming mistake made there with a 500, not
 * a fail-closed 503. These units use a fake store: no Redis.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { describe, it } from 'node:test';
import { fixedWindow, isSluiceError, RateLimiter } from 'sluice';
import { withRateLimit } from 'sluice/node';

/** What another copy's InvalidInputError looks like: the same shape, another class. */
class OtherCopyInvalidInput extends Error {
  readonly code = 'SLUICE_INVALID_INPUT';
  readonly field = 'policy';
  override readonly name = 'InvalidInputError';
}

describe('errors of another copy of sluice', () => {
  it('isSluiceError tells them by their code, and narrows by it', () => {
    const error = new OtherCopyInvalidInput('policy must be a policy of this copy');
    assert.equal(isSluiceError(error), true);
    assert.equal(isSluiceError(error, 'SLUICE_INVALID_INPUT'), true);
    assert.equal(isSluiceError(error, 'SLUICE_UNAVAILABLE'), false);
    for (const other of [
      Object.assign(new Error('x'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('x'), { code: 'SLUICE_SOMETHING_ELSE' }),
      { code: 'SLUICE_INVALID_INPUT', message: 'not an Error' },
      'SLUICE_INVALID_INPUT',
      null,
    ]) {
      assert.equal(isSluiceError(other), false, String(other));
    }
  });

  it('the guard answers such a mistake with 500, never a fail-closed 503', async () => {
    // The limiter of another copy: it refuses this copy's policy with its own class.
    const real = new RateLimiter({
      store: { evalScript: () => Promise.resolve([1, 4, 60_000, 0]) },
    });
    const limiter = Object.assign(Object.create(real) as RateLimiter, {
      take: () => Promise.reject(new OtherCopyInvalidInput('policy must be a policy of this copy')),
    });
    const handler = withRateLimit(
      {
        limiter,
        policy: fixedWindow({ limit: 5, windowMs: 60_000 }),
        route: 'POST/orders',
        identify: () => 'acme',
        failureMode: 'fail-closed',
        onError: () => {},
      },
      (_req, res) => res.end('ok'),
    );
    const server: Server = createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as { port: number };
      const res = await fetch(`http://127.0.0.1:${port}/orders`, { method: 'POST' });
      await res.arrayBuffer();
      assert.equal(res.status, 500);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
