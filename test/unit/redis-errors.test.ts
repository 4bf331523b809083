/**
 * Error replies mapped to sluice errors (a unit: no Redis): "not now" replies, also those a
 * cluster node gives a script's command, are `UnavailableError`s (no decision was made); a
 * refused configuration is a `RedisConfigError`; any other reply is a `StoreError` carrying
 * its first word.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedisConfigError, StoreError, UnavailableError } from 'sluice';
import { errorFromReply } from '../../src/redis/reply-errors.js';

describe('errorFromReply', () => {
  for (const reply of [
    'READONLY You cannot write against a read only replica.',
    'CLUSTERDOWN The cluster is down',
    'LOADING Redis is loading the dataset in memory',
    'ERR Script attempted to access a non local key in a cluster node script',
    // Seen in a failover of the cluster suite: a batch's item failed with it, as a StoreError.
    'ERR Script attempted to execute a command while the cluster is down script: abc, on @user_script:12.',
    // Seen in failovers with waitForReplicas: the node became a replica, or cut a WAIT short.
    'NOREPLICAS Not enough good replicas to write.',
    'UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)',
    'ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 …',
  ]) {
    it(`"${reply.slice(0, 50)}…" is UnavailableError`, () => {
      assert.ok(errorFromReply(reply) instanceof UnavailableError);
    });
  }
  for (const [reply, reason] of [
    ['NOAUTH Authentication required.', 'auth-required'],
    ['WRONGPASS invalid username-password pair or user is disabled.', 'wrong-password'],
    ["NOPERM User app has no permissions to run the 'evalsha' command", 'no-permission'],
    // Redis 7.0's words for a command or key a script uses that the ACL user may not.
    [
      "ERR The user executing the script can't run this command or subcommand script: 4376…, on @user_script:1.",
      'no-permission',
    ],
    [
      "ERR The user executing the script can't access at least one of the keys mentioned in the command script: 4376…",
      'no-permission',
    ],
  ] as const) {
    it(`"${reply.slice(0, 30)}…" is a RedisConfigError (${reason}), not an outage`, () => {
      const error = errorFromReply(reply);
      assert.ok(error instanceof RedisConfigError);
      assert.equal(error.reason, reason);
    });
  }
  it('WRONGTYPE is a StoreError with its code', () => {
    const error = errorFromReply(
      'WRONGTYPE Operation against a key holding the wrong kind of value',
    );
    assert.ok(error instanceof StoreError);
  });
});
