/**
 * A new connection's setup: `AUTH` with the credentials of the moment (asked for on every
 * attempt, so that rotated secrets are picked up), `CLIENT SETNAME`, `SELECT`, pipelined.
 */
import { ReplyError } from './parser.js';

/** What a handshake sends. */
export interface HandshakeOptions {
  readonly credentials?:
    | (() => Promise<{ readonly username?: string; readonly password: string }>)
    | undefined;
  /** The database to `SELECT` (when not 0). */
  readonly database?: number | undefined;
  /** A name to set with `CLIENT SETNAME` (its refusal is ignored when not permitted). */
  readonly name?: string | undefined;
}

/**
 * Sends the handshake's commands with `send` (which throws once the connection is gone);
 * rejects with the first refusal.
 */
export async function handshake(
  options: HandshakeOptions,
  send: (args: readonly string[]) => Promise<unknown>,
): Promise<unknown> {
  const { credentials, database, name } = options;
  const steps: Promise<unknown>[] = [];
  if (credentials !== undefined) {
    const { username, password } = await credentials();
    steps.push(send(username === undefined ? ['AUTH', password] : ['AUTH', username, password]));
  }
  if (name !== undefined) {
    // A user without CLIENT (NOPERM) or a server without it (renamed) still connects; any
    // other refusal (say, "max number of clients reached") fails the attempt.
    steps.push(
      send(['CLIENT', 'SETNAME', name]).catch((error: unknown) => {
        if (!(error instanceof ReplyError && /^(NOPERM|ERR unknown)/.test(error.message))) {
          throw error;
        }
      }),
    );
  }
  if (database !== undefined && database !== 0) {
    steps.push(send(['SELECT', String(database)]));
  }
  return Promise.all(steps);
}
