/**
 * One mapping of Redis error replies to sluice errors, for every client and for errors that
 * come back inside a batch's reply, so that a take gets the same error alone or batched.
 *
 * - A refused configuration — `NOAUTH` (a password is required), `WRONGPASS`, `NOPERM` (the
 *   ACL user may not run the script, or a command the script runs: Redis 7.0 words that
 *   "ERR The user executing the script can't …") — is a `RedisConfigError`, whenever it
 *   comes: no retry helps, and it is never an outage.
 * - "Not now" replies — the server is loading, failing over, busy with a script, a replica
 *   (`READONLY`), a cluster that is down or mid-migration (`CLUSTERDOWN`, `TRYAGAIN`), a
 *   redirection a client did not follow (`MOVED`, `ASK`), a primary without the replicas it
 *   requires (`NOREPLICAS`), a `WAIT` cut short because the node became a replica
 *   (`UNBLOCKED`) — are `UnavailableError`s: no
 *   decision was made and a later call may succeed. Each keeps the reply's first word in
 *   its message (`Redis is not serving: READONLY …`).
 * - Every other reply (`WRONGTYPE`, `OOM`, a script error) is a `StoreError`
 *   whose `redisCode` is the reply's first word.
 */
import { type RedisConfigError, StoreError, UnavailableError } from '../errors.js';
import { SCRIPT_ACL_REFUSAL, setupError } from './setup-errors.js';

/** Error replies that mean "not now" rather than a bad call. */
const TRANSIENT_REPLIES =
  /^(LOADING|BUSY|MASTERDOWN|READONLY|CLUSTERDOWN|TRYAGAIN|MOVED|ASK|NOREPLICAS|UNBLOCKED)\b/;

/**
 * A script's command refused by a cluster node: a key whose slot the node does not serve (a
 * stale slot map), or any command while the cluster is down (a failover under way). Both
 * fail at the script's first command on that key, before it wrote anything. And a `WAIT`
 * refused by a node that became a replica since the script it follows was sent.
 */
const NOT_HERE = /non local key|while the cluster is down|WAIT cannot be used with replica/;

/** Replies that say the connection's configuration is refused. */
const REFUSED_SETUP = /^(NOAUTH|WRONGPASS|NOPERM)\b/;

/** The sluice error for a Redis error reply's text. */
export function errorFromReply(
  message: string,
  cause?: unknown,
): StoreError | UnavailableError | RedisConfigError {
  if (REFUSED_SETUP.test(message) || SCRIPT_ACL_REFUSAL.test(message)) {
    const refused = setupError(cause ?? new Error(message));
    if (refused !== undefined) return refused;
  }
  const options = cause === undefined ? undefined : { cause };
  return TRANSIENT_REPLIES.test(message) || NOT_HERE.test(message)
    ? new UnavailableError(`Redis is not serving: ${message}`, options)
    : new StoreError(message, options);
}

/** True for a reply that says the command did not run here and belongs to another node. */
export function isRedirection(message: string): boolean {
  return /^(MOVED|ASK|TRYAGAIN|CROSSSLOT)\b/.test(message);
}
