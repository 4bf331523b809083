/**
 * The client's address as a rate-limit identity, for IP-keyed outer limits: never a
 * header the client wrote, unless it came through a proxy you trust.
 *
 * - Without `trustProxy`, `X-Forwarded-For` is ignored: the address is the socket's peer.
 * - With `trustProxy` (addresses, CIDR ranges, or the names `loopback`, `linklocal`,
 *   `uniquelocal`, as in `proxy-addr`, which does the walk), the address is the first
 *   untrusted hop from the right of `X-Forwarded-For`; a client can prepend anything on the
 *   left, and it is never read.
 * - IPv6 addresses are folded to their network, /64 by default (`2001:db8:1:2::/64`), since
 *   one client usually holds a whole /64 and could rotate through it; `ipv6Prefix` changes
 *   the prefix (a /56 or /48 where providers hand those out, /128 for one address each).
 *   IPv4-mapped IPv6 addresses count as the IPv4 address.
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
  /**
   * The prefix length IPv6 client addresses are folded to, so that one client rotating
   * through its network is one scope: an integer from 1 to 128. Default 64.
   */
  readonly ipv6Prefix?: number;
}

/** The default IPv6 prefix of a client: a /64, the usual smallest allocation. */
const DEFAULT_IPV6_PREFIX = 64;

/** `ipv6Prefix`, checked: an integer from 1 to 128, default 64. */
function ipv6PrefixOf(value: unknown): number {
  if (value === undefined) return DEFAULT_IPV6_PREFIX;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 128) {
    throw new InvalidInputError('ipv6Prefix', 'an integer from 1 to 128', value);
  }
  return value;
}

/**
 * Makes `identify`-ready function: `(req) => client address`, IPv6 folded to its
 * `ipv6Prefix` network (default /64).
 *
 * @throws {InvalidInputError} when `options` is not an object, has a key other than
 *   `trustProxy` and `ipv6Prefix` (a misspelled `trustproxy` would silently key every client
 *   on the proxy's address), `trustProxy` is not a valid address, range or name, or
 *   `ipv6Prefix` is not an integer from 1 to 128.
 */
export function clientAddressOf(
  options: ClientAddressOptions = {},
): (req: IncomingMessage) => string | undefined {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidInputError('options', 'an object such as { trustProxy }', options);
  }
  rejectUnknownKeys(options, ['trustProxy', 'ipv6Prefix'], 'options');
  const prefix = ipv6PrefixOf(options.ipv6Prefix);
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
    return foldAddress(proxyaddr(req, trust), prefix);
  };
}

/**
 * An address as a scope: IPv4 as is (also when IPv4-mapped), IPv6 as its network of
 * `ipv6Prefix` bits, written `<network>/<prefix>` (`2001:db8:1:2::/64`; a /64 keeps its four
 * groups written out, `2001:db8:0:0::/64`, as before the prefix was an option, so IP quotas
 * keep their keys). `undefined` for text that is not an address.
 *
 * @throws {InvalidInputError} when `ipv6Prefix` is not an integer from 1 to 128.
 */
export function foldAddress(address: string, ipv6Prefix = DEFAULT_IPV6_PREFIX): string | undefined {
  const prefix = ipv6PrefixOf(ipv6Prefix);
  if (!ipaddr.isValid(address)) return undefined;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  // The network: the first `prefix` bits of the eight 16-bit groups, the rest zero.
  const parts = v6.parts.map((part, i) => {
    const bits = Math.min(Math.max(prefix - 16 * i, 0), 16);
    return bits === 0 ? 0 : part & ((0xffff << (16 - bits)) & 0xffff);
  });
  if (prefix === DEFAULT_IPV6_PREFIX) {
    return `${parts
      .slice(0, 4)
      .map((part) => part.toString(16))
      .join(':')}::/64`;
  }
  return `${new ipaddr.IPv6(parts).toString()}/${prefix}`;
}
