/**
 * What a failure of Redis means, in words, as a setup error (exit 2): a Redis that cannot be
 * reached, one that was reached but refused the setup or a command (a password, an ACL
 * user's permissions, a database, TLS), or one that failed a command otherwise. Only the
 * first is "cannot reach": a wrong password is a configuration to fix, not an outage.
 */
import {
  InvalidInputError,
  isSluiceError,
  RedisConfigError,
  type RedisConfigReason,
} from '../errors.js';
import { resolveEndpoint } from '../redis/node-redis/endpoint.js';
import { setupReason } from '../redis/setup-errors.js';
import { CliError, DEFAULT_URL, EXIT } from './exit.js';

/** The URL without its password, for messages: `redis://user:***@host:6379/0`. */
export function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password === '') return url;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}

/** Why Redis refused, and its own words for it (the error reply, or the TLS error). */
interface Refusal {
  readonly reason: RedisConfigReason;
  readonly said: string;
}

/** The prefix `RedisConfigError` puts before what Redis (or TLS) said. */
const CONFIG_PREFIX = /^Redis refused the configuration \([a-z-]+\): /;
/** The prefix `StoreError` puts before an error reply. */
const REPLY_PREFIX = /^Redis replied with an error: /;

/**
 * The refusal in an error: a `RedisConfigError`, or an error reply (`NOAUTH`, `WRONGPASS`,
 * `NOPERM`…) as node-redis or sluice raised it, or as the cause of one.
 */
function refusalOf(error: unknown): Refusal | undefined {
  if (error instanceof RedisConfigError) {
    return { reason: error.reason, said: error.message.replace(CONFIG_PREFIX, '') };
  }
  let current = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    const said = current.message.replace(REPLY_PREFIX, '');
    const reason = setupReason(current) ?? setupReason(said);
    if (reason !== undefined) return { reason, said };
    current = current.cause;
  }
  return undefined;
}

/** The database a URL selects, for words; undefined when it cannot be read. */
function databaseOf(url: string): number | undefined {
  try {
    return resolveEndpoint({ url }).database;
  } catch {
    return undefined;
  }
}

/** `the user may not run PTTL`, from a `NOPERM` reply. */
function permissionWords(said: string): string {
  const command = /run the '([^']+)' command/.exec(said)?.[1];
  if (command !== undefined) return `the user may not run ${command.toUpperCase()}`;
  if (/access (one|at least one) of the keys/.test(said))
    return 'the user may not access these keys';
  if (/script can't run this command/.test(said)) {
    return 'the user may not run a command the scripts use';
  }
  return 'the user may not run a command sluice needs';
}

/** What is wrong, in words, and what to do about it. */
function refusalWords(refusal: Refusal, url: string): { words: string; hint: string } {
  switch (refusal.reason) {
    case 'wrong-password':
      return {
        words: /without any password configured/.test(refusal.said)
          ? 'a password was given, but it has none'
          : 'wrong password or unknown user',
        hint: 'Check the user and password in --url or REDIS_URL (redis://user:password@host:port).',
      };
    case 'auth-required':
      return {
        words: 'it requires a password',
        hint: 'Give it in --url or REDIS_URL: redis://:password@host:port, or redis://user:password@host:port for an ACL user.',
      };
    case 'no-permission':
      return {
        words: permissionWords(refusal.said),
        hint: 'Allow the user what this command runs (ACL SETUSER), or give another user in --url or REDIS_URL.',
      };
    case 'database': {
      const database = databaseOf(url);
      return {
        words:
          database === undefined ? 'it has no such database' : `it has no database ${database}`,
        hint: 'Choose a database the server has (0 to its "databases" setting minus 1) in the URL: redis://host:port/0.',
      };
    }
    case 'tls':
      return {
        words: 'the TLS handshake failed',
        hint: 'rediss:// needs a server that speaks TLS with a certificate this machine trusts; redis:// is for one without TLS.',
      };
  }
}

/** The setup error of a refusal, at start (`the connection`) or on a command (`a command`). */
function refused(refusal: Refusal, url: string, what: 'the connection' | 'a command'): CliError {
  const { words, hint } = refusalWords(refusal, url);
  return new CliError(
    `Redis at ${redacted(url)} refused ${what}: ${words} (${refusal.said})`,
    EXIT.usage,
    [hint],
  );
}

/**
 * The setup error for a failed `connectRedis`: a bad URL, a refused setup, else a Redis
 * that cannot be reached. Anything else is not Redis's and is returned as it is.
 */
export function connectFailure(error: unknown, url: string): unknown {
  if (error instanceof InvalidInputError) {
    return new CliError(
      `${redacted(url)} is not a redis://, rediss:// or unix:// URL (--url, REDIS_URL)`,
      EXIT.usage,
    );
  }
  const refusal = refusalOf(error);
  if (refusal !== undefined) return refused(refusal, url, 'the connection');
  if (isSluiceError(error, 'SLUICE_UNAVAILABLE') || isSluiceError(error, 'SLUICE_TIMEOUT')) {
    return new CliError(
      `cannot reach Redis at ${redacted(url)}: ${error.message.replace(/^Redis unavailable: /, '')}`,
      EXIT.usage,
      [`Give its address with --url or REDIS_URL (default ${DEFAULT_URL}).`],
    );
  }
  if (isSluiceError(error)) {
    return new CliError(`Redis at ${redacted(url)} failed: ${error.message}`, EXIT.usage);
  }
  return error;
}

/**
 * The setup error for a failed Redis command: refused (`NOAUTH`, `WRONGPASS`, `NOPERM`…), a
 * timeout, a lost connection, another error reply. Anything else is returned as it is.
 */
export function commandFailure(error: unknown, url: string): unknown {
  if (error instanceof CliError) return error;
  const refusal = refusalOf(error);
  if (refusal !== undefined) return refused(refusal, url, 'a command');
  if (isSluiceError(error) && error.code !== 'SLUICE_INVALID_INPUT') {
    return new CliError(`Redis at ${redacted(url)} failed: ${error.message}`, EXIT.usage);
  }
  if (error instanceof Error && /^[A-Z]+ /.test(error.message)) {
    // An error reply from node-redis's own commands (ERR unknown command…).
    return new CliError(`Redis at ${redacted(url)} replied: ${error.message}`, EXIT.usage);
  }
  return error;
}
