import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LocalWindow } from 'sluice/http';

describe('LocalWindow: the local fallback of fail-open routes', () => {
  it('admits up to the limit per window, then resets', () => {
    const window = new LocalWindow(3, 1000);
    assert.deepEqual(
      [1, 2, 3, 4].map(() => window.take('k', 1, 0)),
      [true, true, true, false],
    );
    assert.equal(window.take('k', 1, 999), false);
    assert.equal(window.take('k', 1, 1000), true);
  });

  it('never admits a cost above the limit, and a denial consumes nothing', () => {
    const window = new LocalWindow(3, 1000);
    assert.equal(window.take('k', 4, 0), false);
    assert.equal(window.take('k', 3, 0), true);
  });

  it('keeps at most maxKeys windows', () => {
    const window = new LocalWindow(1, 1000, 100);
    for (let i = 0; i < 1000; i++) window.take(`k${i}`, 1, 0);
    assert.ok(window.size <= 100);
  });
});
