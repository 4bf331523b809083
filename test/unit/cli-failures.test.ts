/**
 * What the CLI says when Redis fails: a refusal (a password, an ACL user's permissions, a
 * database, TLS) in words — at the start or on a running connection, as node-redis's error
 * reply, a sluice error or its cause — and "cannot reach" only for an outage or a timeout.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedisConfigError, StoreError, TimeoutError, UnavailableError } from 'sluice';
import { CliError } from '../../src/cli/exit.js';
import { commandFailure, connectFailure } from '../../src/cli/failures.js';

const url = 'redis://ann:s3cret@127.0.0.1:6390/7';
const at = 'Redis at redis://ann:***@127.0.0.1:6390/7';

/** An error reply as node-redis raises it. */
class ErrorReply extends Error {}

function message(error: unknown): string {
  assert.ok(error instanceof CliError, String(error));
  assert.equal(error.exitCode, 2);
  assert.doesNotMatch(error.message, /s3cret/);
  return error.message;
}

describe('the CLI on a failing Redis', () => {
  it('a refused setup at the start: each reason in words, the password redacted', () => {
    const cases: [RedisConfigError, string][] = [
      [
        new RedisConfigError('wrong-password', 'WRONGPASS invalid username-password pair'),
        `${at} refused the connection: wrong password or unknown user (WRONGPASS invalid username-password pair)`,
      ],
      [
        new RedisConfigError('auth-required', 'NOAUTH Authentication required.'),
        `${at} refused the connection: it requires a password (NOAUTH Authentication required.)`,
      ],
      [
        new RedisConfigError(
          'no-permission',
          "NOPERM User ann has no permissions to run the 'client|setname' command",
        ),
        `${at} refused the connection: the user may not run CLIENT|SETNAME (NOPERM User ann has no permissions to run the 'client|setname' command)`,
      ],
      [
        new RedisConfigError('database', 'ERR DB index is out of range'),
        `${at} refused the connection: it has no database 7 (ERR DB index is out of range)`,
      ],
      [
        new RedisConfigError('tls', 'SSL routines::wrong version number'),
        `${at} refused the connection: the TLS handshake failed (SSL routines::wrong version number)`,
      ],
    ];
    for (const [error, expected] of cases) {
      const failure = connectFailure(error, url);
      assert.equal(message(failure), expected);
      assert.equal((failure as CliError).details.length, 1, 'one line of what to do');
    }
  });

  it('a refusal on a running connection: an error reply, a sluice error or its cause', () => {
    const cases: [unknown, string][] = [
      [
        new ErrorReply('NOAUTH Authentication required.'),
        'it requires a password (NOAUTH Authentication required.)',
      ],
      [
        new StoreError('WRONGPASS invalid username-password pair or user is disabled.'),
        'wrong password or unknown user (WRONGPASS invalid username-password pair or user is disabled.)',
      ],
      [
        new StoreError("NOPERM this user has no permissions to run the 'evalsha' command", {
          cause: new ErrorReply("NOPERM this user has no permissions to run the 'evalsha' command"),
        }),
        "the user may not run EVALSHA (NOPERM this user has no permissions to run the 'evalsha' command)",
      ],
      [
        new UnavailableError('the call failed', {
          cause: new ErrorReply(
            'NOPERM this user has no permissions to access one of the keys used as arguments',
          ),
        }),
        'the user may not access these keys (NOPERM this user has no permissions to access one of the keys used as arguments)',
      ],
      [new ErrorReply('NOPERM no'), 'the user may not run a command sluice needs (NOPERM no)'],
    ];
    for (const [error, words] of cases) {
      assert.equal(message(commandFailure(error, url)), `${at} refused a command: ${words}`);
    }
  });

  it('"cannot reach" only for an outage or a timeout; other failures as before', () => {
    assert.match(
      message(
        connectFailure(
          new UnavailableError('Redis unavailable: connect ECONNREFUSED 127.0.0.1:6390'),
          url,
        ),
      ),
      /^cannot reach Redis at redis:\/\/ann:\*\*\*@127\.0\.0\.1:6390\/7: connect ECONNREFUSED/,
    );
    assert.match(message(connectFailure(new TimeoutError(2000), url)), /^cannot reach Redis at /);
    assert.equal(
      message(connectFailure(new StoreError('ERR unknown command'), url)),
      `${at} failed: Redis replied with an error: ERR unknown command`,
    );
    assert.equal(
      message(commandFailure(new TimeoutError(5000), url)),
      `${at} failed: rate limiter call exceeded its 5000 ms deadline`,
    );
    assert.equal(
      message(commandFailure(new ErrorReply('ERR unknown command'), url)),
      `${at} replied: ERR unknown command`,
    );
    const bug = new TypeError('not Redis');
    assert.equal(commandFailure(bug, url), bug);
    assert.equal(connectFailure(bug, url), bug);
  });
});
