/**
 * RESP2 for sluice's own script connection (see `connection.ts`): the encoding of a command
 * and an incremental reply parser.
 *
 * Replies: `+` simple string → string, `-` error → a {@link ReplyError} (a value, never
 * thrown: inside an array it is an element, as node-redis gives it), `:` integer → number,
 * `$` bulk string → UTF-8 string (`$-1` → null), `*` array → array, nested (`*-1` → null).
 * The parser takes the stream in chunks cut at any byte: a reply that is not complete yet
 * waits, unparsed, for more bytes; many replies in one chunk come out one by one.
 */

/** An error reply: its message is the reply's text (`NOSCRIPT No matching script…`). */
export class ReplyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplyError';
  }
}

/** The stream is not RESP2 (or not a reply this parser knows): the connection must go. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(`RESP protocol error: ${message}`);
    this.name = 'ProtocolError';
  }
}

/**
 * Encoded bulk strings of the short arguments of `EVALSHA` calls met before: the ones every
 * script call repeats (the script's SHA-1, a policy's limit and window, the batch ops) are
 * encoded once. Filled up to its bound and then kept (no eviction: constants come first and
 * stay), so what varies (keys are longer than {@link MEMO_MAX_CHARS}, ids) costs one lookup.
 * Only `EVALSHA`'s: never a handshake's credentials.
 */
const encodedArgs = new Map<string, string>();
const MEMO_ENTRIES = 512;
const MEMO_MAX_CHARS = 48;

/** `args` as a RESP array of bulk strings. */
export function encodeCommand(args: readonly string[]): string {
  const memo = args[0] === 'EVALSHA';
  let out = `*${args.length}\r\n`;
  for (const arg of args) {
    let encoded = memo ? encodedArgs.get(arg) : undefined;
    if (encoded === undefined) {
      encoded = `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
      if (memo && arg.length <= MEMO_MAX_CHARS && encodedArgs.size < MEMO_ENTRIES) {
        encodedArgs.set(arg, encoded);
      }
    }
    out += encoded;
  }
  return out;
}

/** Returned by the readers when the buffer ends before the value does. */
const INCOMPLETE: unique symbol = Symbol('incomplete');
type Incomplete = typeof INCOMPLETE;

const CR = 13;
const LF = 10;
const MINUS = 45;
const ZERO = 48;

/** The bytes of the shortest RESP2 value (`+\r\n`, `-\r\n`). */
const MIN_VALUE_BYTES = 3;

/** Arrays deeper than this are refused (a script cannot return them; a guard on recursion). */
const MAX_DEPTH = 64;

const EMPTY = Buffer.alloc(0);

/** Incremental RESP2 reply parser: `feed` it chunks, it calls `onReply` once per reply. */
export class ReplyParser {
  readonly #onReply: (reply: unknown) => void;
  /** The bytes being parsed (the unparsed rest of earlier chunks, then the new one). */
  #buffer: Buffer = EMPTY;
  #offset = 0;
  /** Chunks received while the reply being waited for cannot be complete yet. */
  #held: Buffer[] = [];
  #heldBytes = 0;
  /** Bytes (from the start of the incomplete reply) needed before parsing is worth retrying. */
  #needed = 0;
  /** While parsing: where the reply being parsed starts, and the bytes it needs at least. */
  #replyStart = 0;
  #replyNeeds = 0;
  /** Bumped by `reset`: a reset from inside `onReply` ends the `feed` under way. */
  #generation = 0;

  constructor(onReply: (reply: unknown) => void) {
    this.#onReply = onReply;
  }

  /** Bytes received and not yet parsed into a reply. */
  get buffered(): number {
    return this.#buffer.length - this.#offset + this.#heldBytes;
  }

  /** Forgets any partial reply (a new connection starts a new stream). */
  reset(): void {
    this.#generation++;
    this.#buffer = EMPTY;
    this.#offset = 0;
    this.#held = [];
    this.#heldBytes = 0;
    this.#needed = 0;
  }

  /**
   * Parses `chunk`, calling `onReply` for every reply it completes. The chunk is not kept:
   * the bytes of a reply still incomplete are copied, so the caller may reuse the chunk's
   * memory once `feed` returns (a socket's `onread` buffer).
   *
   * @throws {ProtocolError} when the stream is not RESP2; the parser is then unusable
   *   until {@link reset}.
   */
  feed(chunk: Buffer): void {
    if (this.#needed > 0) {
      this.#held.push(Buffer.from(chunk));
      this.#heldBytes += chunk.length;
      if (this.#heldBytes < this.#needed) return;
      this.#buffer = Buffer.concat(this.#held, this.#heldBytes);
      this.#held = [];
      this.#heldBytes = 0;
      this.#needed = 0;
    } else {
      this.#buffer = chunk;
    }
    this.#offset = 0;
    const buffer = this.#buffer;
    const generation = this.#generation;
    while (this.#offset < buffer.length) {
      const start = this.#offset;
      this.#replyStart = start;
      this.#replyNeeds = 0;
      const reply = this.#value(0);
      if (reply === INCOMPLETE) {
        // Keep the rest, from the start of this reply, for when more bytes come.
        const rest = Buffer.from(buffer.subarray(start));
        this.#held = [rest];
        this.#heldBytes = rest.length;
        this.#needed = Math.max(this.#replyNeeds, rest.length + 1);
        this.#buffer = EMPTY;
        this.#offset = 0;
        return;
      }
      this.#onReply(reply);
      if (this.#generation !== generation) return;
    }
    this.#buffer = EMPTY;
    this.#offset = 0;
  }

  /** The value at `#offset` (advancing past it), or INCOMPLETE (`#offset` then undefined). */
  #value(depth: number): unknown {
    const buffer = this.#buffer;
    const type = buffer[this.#offset++];
    switch (type) {
      case 58: // ':'
        return this.#integer();
      case 36: {
        // '$'
        const length = this.#integer();
        if (length === INCOMPLETE) return INCOMPLETE;
        if (length < 0) return null;
        const from = this.#offset;
        const to = from + length;
        if (to + 2 > buffer.length) {
          // No use parsing again before the whole bulk string is there.
          this.#replyNeeds = to + 2 - this.#replyStart;
          return INCOMPLETE;
        }
        if (buffer[to] !== CR || buffer[to + 1] !== LF) {
          throw new ProtocolError('bulk string not followed by CRLF');
        }
        this.#offset = to + 2;
        return buffer.toString('utf8', from, to);
      }
      case 42: {
        // '*'
        const length = this.#integer();
        if (length === INCOMPLETE) return INCOMPLETE;
        if (length < 0) return null;
        if (depth >= MAX_DEPTH) throw new ProtocolError(`arrays nested deeper than ${MAX_DEPTH}`);
        const array: unknown[] = new Array(length);
        for (let i = 0; i < length; i++) {
          const element = this.#value(depth + 1);
          if (element === INCOMPLETE) {
            // The elements after this one need 3 bytes each at least ("+\r\n"): no use
            // parsing again before they can be there. Without this bound a long array read
            // in small pieces was parsed again from its start on every piece.
            this.#replyNeeds =
              Math.max(this.#replyNeeds, buffer.length - this.#replyStart + 1) +
              MIN_VALUE_BYTES * (length - i - 1);
            return INCOMPLETE;
          }
          array[i] = element;
        }
        return array;
      }
      case 43: // '+'
        return this.#line();
      case 45: {
        // '-'
        const line = this.#line();
        return line === INCOMPLETE ? INCOMPLETE : new ReplyError(line);
      }
      case undefined:
        return INCOMPLETE;
      default:
        throw new ProtocolError(`unexpected reply type byte ${type}`);
    }
  }

  /** The integer ending in CRLF at `#offset` (advancing past the CRLF), or INCOMPLETE. */
  #integer(): number | Incomplete {
    const buffer = this.#buffer;
    const end = buffer.length;
    let i = this.#offset;
    let negative = false;
    if (i < end && buffer[i] === MINUS) {
      negative = true;
      i++;
    }
    const digitsFrom = i;
    let value = 0;
    while (i < end) {
      const byte = buffer[i] as number;
      if (byte === CR) break;
      const digit = byte - ZERO;
      if (digit < 0 || digit > 9) throw new ProtocolError('a malformed integer');
      value = value * 10 + digit;
      i++;
    }
    if (i + 1 >= end) return INCOMPLETE;
    if (buffer[i + 1] !== LF || i === digitsFrom) throw new ProtocolError('a malformed integer');
    // Beyond 2^53 the running sum loses digits: read those (rare) the slow way, exactly.
    if (i - digitsFrom > 15) value = Number(buffer.toString('latin1', digitsFrom, i));
    this.#offset = i + 2;
    return negative ? -value : value;
  }

  /** The text up to CRLF at `#offset` (advancing past the CRLF), or INCOMPLETE. */
  #line(): string | Incomplete {
    const buffer = this.#buffer;
    const cr = buffer.indexOf(CR, this.#offset);
    if (cr < 0 || cr + 1 >= buffer.length) return INCOMPLETE;
    if (buffer[cr + 1] !== LF) throw new ProtocolError('a line not ended by CRLF');
    const line = buffer.toString('utf8', this.#offset, cr);
    this.#offset = cr + 2;
    return line;
  }
}
