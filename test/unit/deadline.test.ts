import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TimeoutError } from 'sluice';
import { DeadlineQueue } from '../../src/limiter/deadline.js';

const never = () => new Promise<never>(() => {});

describe('DeadlineQueue: one timer for every call', () => {
  it('passes a value that arrives in time', async () => {
    const deadlines = new DeadlineQueue(1000);
    assert.equal(await deadlines.race(Promise.resolve(7)), 7);
  });

  it('passes an error that arrives in time', async () => {
    const deadlines = new DeadlineQueue(1000);
    await assert.rejects(deadlines.race(Promise.reject(new Error('boom'))), /boom/);
  });

  it('rejects with TimeoutError when the work never settles, even though it is still pending', async () => {
    const deadlines = new DeadlineQueue(30);
    await assert.rejects(
      deadlines.race(never()),
      (error: unknown) => error instanceof TimeoutError && error.timeoutMs === 30,
    );
    assert.equal(deadlines.size, 0);
  });

  it('expires many pending calls and keeps the ones that settled', async () => {
    const deadlines = new DeadlineQueue(40);
    const results = await Promise.allSettled(
      Array.from({ length: 3000 }, (_, i) =>
        deadlines.race(i % 3 === 0 ? never() : Promise.resolve(i)),
      ),
    );
    assert.equal(results.filter((r) => r.status === 'rejected').length, 1000);
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 2000);
    assert.equal(deadlines.size, 0);
  });

  it('a late value after the deadline is ignored', async () => {
    const deadlines = new DeadlineQueue(10);
    const late = sleep(50).then(() => 'late');
    await assert.rejects(deadlines.race(late), TimeoutError);
    await late;
  });

  it('calls started later get later deadlines (the queue stays ordered)', async () => {
    const deadlines = new DeadlineQueue(60);
    const first = deadlines.race(never()).catch((error: unknown) => error);
    await sleep(40);
    let secondDone = false;
    const second = deadlines.race(never()).catch(() => {
      secondDone = true;
    });
    assert.ok((await first) instanceof TimeoutError);
    assert.equal(secondDone, false, 'the second call must not expire with the first');
    await second;
    assert.equal(secondDone, true);
  });
});
