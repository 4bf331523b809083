/**
 * A connection's setup refused by a Redis that was reached — a configuration mistake that no
 * retry fixes — told apart from an outage, for every client and at any time: at start (the
 * handshake) and on a running connection (a password rotated on the server, an ACL changed).
 */
import { RedisConfigError, type RedisConfigReason } from '../errors.js';

/**
 * An ACL refusal of a command a script runs, as Redis 7.0 words it: "ERR The user executing
 * the script can't run this command or subcommand" (also "… can't access at least one of the
 * keys …").
 */
export const SCRIPT_ACL_REFUSAL = /^ERR The user executing the script can't /;

/** The {@link RedisConfigReason} of an error's message and code, or undefined for anything else. */
export function setupReason(error: unknown): RedisConfigReason | undefined {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  // A password given to a server that has none is refused like a wrong one.
  if (/^WRONGPASS\b|called without any password configured/.test(message)) {
    return 'wrong-password';
  }
  if (/^NOAUTH\b/.test(message)) return 'auth-required';
  // Redis 7.0 refuses a script's command with ERR (7.2 on: NOPERM, like a lone command).
  if (/^NOPERM\b/.test(message) || SCRIPT_ACL_REFUSAL.test(message)) return 'no-permission';
  if (/DB index is out of range|invalid DB index/i.test(message)) return 'database';
  if (
    (typeof code === 'string' && /^ERR_SSL|^ERR_TLS|CERT|UNABLE_TO_VERIFY/.test(code)) ||
    /SSL routines|wrong version number|self[- ]signed certificate|certificate/i.test(message)
  ) {
    return 'tls';
  }
  return undefined;
}

/** The {@link RedisConfigError} of a refused setup, or undefined for anything else. */
export function setupError(error: unknown): RedisConfigError | undefined {
  const reason = setupReason(error);
  if (reason === undefined) return undefined;
  const message = error instanceof Error ? error.message : String(error);
  return new RedisConfigError(reason, message, { cause: error });
}
