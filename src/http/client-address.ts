/**
 * The client's address as a rate-limit identity, for IP-keyed outer limits: never a
 * header the client wrote, unless it came through a proxy you trust.
 *
 * - Without `trustProxy`, `X-Forwarded-For` is ignored: the address is the socket's peer.
 * - With `trustProxy` (addresses, CIDR ranges, or the names `loopback`, `linklocal`,
 *   `uniquelocal`, as in `proxy-addr`, which does the walk), the address is the first
 *   untrusted hop from the right of `X-Forwarded-For`; a client can prepend anything on the
 *   left, and it is never read.
 * - IPv6 addresses are folded to their /64 network (`2001:db8:1:2::/64`), since one client
 *   usually holds a whole /64 and could rotate through it; IPv4-mapped IPv6 addresses count
 *   as the IPv4 address.
 */
import type { IncomingMessage } from 'node:http';
import ipaddr from 'ipaddr.js';
import proxyaddr from 'proxy-addr';
import { InvalidInputError } from '../errors.js';
import { rejectUnknownKeys } from '../validate.js';

/** Options of {@link clientAddressOf}. */
export interface ClientAddressOptions {
  /** Proxies whose `X-Forwarded-For` entries are believed (see `proxy-addr`). Default: none. */
  readonly trustProxy?: string | readonly string[];
}

/**
 * Makes `identify`-ready function: `(req) => client address`, IPv6 folded to /64.
 *
 * @throws {InvalidInputError} when `options` is not an object, has a key other than
 *   `trustProxy` (a misspelled `trustproxy` would silently key every client on the proxy's
 *   address), or `trustProxy` is not a valid address, range or name.
 */
export function clientAddressOf(
  options: ClientAddressOptions = {},
): (req: IncomingMessage) => string | undefined {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidInputError('options', 'an object such as { trustProxy }', options);
  }
  rejectUnknownKeys(options, ['trustProxy'], 'options');
  const trustList =
    options.trustProxy === undefined ? [] : ([] as string[]).concat(options.trustProxy);
  let trust: ReturnType<typeof proxyaddr.compile>;
  try {
    trust = proxyaddr.compile(trustList);
  } catch (error) {
    const invalid = new InvalidInputError(
      'trustProxy',
      'addresses, CIDR ranges or proxy-addr names',
      options.trustProxy,
    );
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
  return (req) => {
    if (req.socket?.remoteAddress === undefined) return undefined;
    return foldAddress(proxyaddr(req, trust));
  };
}

/** An address as a scope: IPv4 as is (also when IPv4-mapped), IPv6 as its /64 network. */
export function foldAddress(address: string): string | undefined {
  if (!ipaddr.isValid(address)) return undefined;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  const [a, b, c, d] = v6.parts;
  return `${[a, b, c, d].map((part) => (part ?? 0).toString(16)).join(':')}::/64`;
}
