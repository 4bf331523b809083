/**
 * How the script connection beside an ioredis (or iovalkey) `Redis` of the application's
 * (`../beside-client.ts`) reads the client: its options, its `status`, and its `ready` and
 * `end` events.
 *
 * Copied: `host` and `port` or `path`, `tls` (`tls.connect` options, or `true`), `db`,
 * `username` and `password`, `connectTimeout`. No connection is made beside a client that
 * connects through Sentinel (`sentinels`) or a custom `Connector`, or that has a `keyPrefix`
 * (ioredis puts it before the script's keys, a connection of sluice's would not: the same
 * scope would have two keys).
 */
import type { ConnectionOptions } from 'node:tls';
import { readProperty as read } from '../../call-safely.js';
import type { ClientReader } from '../beside-client.js';
import type { RespConnectionOptions } from '../resp/connection.js';

type Options = Omit<RespConnectionOptions, 'reconnectStrategy'>;

/** ioredis's default `connectTimeout`, in ms. */
const IOREDIS_CONNECT_TIMEOUT_MS = 10_000;

const optionalString = (value: unknown) =>
  value === undefined || value === null || typeof value === 'string';

/**
 * The options of a connection to where an ioredis `Redis` with `options` connects, or
 * undefined when they cannot be copied exactly.
 *
 * @internal Exported for tests.
 */
export function ioredisBesideOptions(options: unknown): Options | undefined {
  if (typeof options !== 'object' || options === null) return undefined;
  const o = options as Record<string, unknown>;
  const sentinels = o.sentinels;
  if (Array.isArray(sentinels) ? sentinels.length > 0 : sentinels != null) return undefined;
  if (o.Connector !== undefined && o.Connector !== null) return undefined;
  if (o.keyPrefix !== undefined && o.keyPrefix !== null && o.keyPrefix !== '') return undefined;
  const { username, password } = o;
  if (!optionalString(username) || !optionalString(password)) return undefined;
  const database = o.db ?? 0;
  if (typeof database !== 'number' || !Number.isInteger(database) || database < 0) {
    return undefined;
  }
  const connectTimeout = o.connectTimeout ?? IOREDIS_CONNECT_TIMEOUT_MS;
  if (typeof connectTimeout !== 'number' || !(connectTimeout > 0)) return undefined;
  const credentials =
    typeof password === 'string' || typeof username === 'string'
      ? () =>
          Promise.resolve(
            typeof username === 'string'
              ? { username, password: typeof password === 'string' ? password : '' }
              : { password: password as string },
          )
      : undefined;
  const common = { credentials, database, name: 'sluice', connectTimeoutMs: connectTimeout };
  if (typeof o.path === 'string') {
    return o.tls === undefined || o.tls === null ? { ...common, path: o.path } : undefined;
  }
  const host = o.host ?? 'localhost';
  const port = o.port ?? 6379;
  if (typeof host !== 'string' || typeof port !== 'number') return undefined;
  let tls: ConnectionOptions | undefined;
  if (o.tls === true) tls = {};
  else if (typeof o.tls === 'object' && o.tls !== null) tls = { ...(o.tls as ConnectionOptions) };
  else if (o.tls !== undefined && o.tls !== null && o.tls !== false) return undefined;
  return { ...common, host, port, tls };
}

/** An ioredis (or iovalkey) `Redis`. */
export const IOREDIS_READER: ClientReader = {
  kind: 'ioredis',
  options: (client) => ioredisBesideOptions(read(client, 'options')),
  // 'end': closed by `quit()`/`disconnect()`, or given up on by its retry strategy; and from
  // the moment `quit()` or `disconnect()` is called (`manuallyClosing`), though the status
  // stays 'ready' until the socket closes, its calls fail ("Connection is closed.").
  isOpen: (client) => read(client, 'status') !== 'end' && read(client, 'manuallyClosing') !== true,
  isReady: (client) => read(client, 'status') === 'ready',
  identity: (client) => client,
  readyEvent: 'ready',
  // Both a close by its owner and its retry strategy giving up.
  endEvent: 'end',
};
