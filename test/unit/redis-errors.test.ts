/**
 * Error replies mapped to sluice errors (a unit: no Redis): "not now" replies, also those a
 * cluster node gives a script's command, are `UnavailableError`s (no decision was made); any
 * other reply is a `StoreError` carrying its first word.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StoreError, UnavailableError } from 'sluice';
import { errorFromReply } from '../../src/redis/reply-errors.js';

describe('errorFromReply', () => {
  for (const reply of [
    'READONLY You cannot write against a read only replica.',
    'CLUSTERDOWN The cluster is down',
    'LOADING Redis is loading the dataset in memory',
    'ERR Script attempted to access a non local key in a cluster node script',
    // Seen in a failover of the cluster suite: a batch's item failed with it, as a StoreError.
    'ERR Script attempted to execute a command while the cluster is down script: abc, on @user_script:12.',
  ]) {
    it(`"${reply.slice(0, 50)}…" is UnavailableError`, () => {
      assert.ok(errorFromReply(reply) instanceof UnavailableError);
    });
  }
  it('WRONGTYPE is a StoreError with its code', () => {
    const error = errorFromReply(
      'WRONGTYPE Operation against a key holding the wrong kind of value',
    );
    assert.ok(error instanceof StoreError);
  });
});
