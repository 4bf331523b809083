/**
 * A minimal pipelined RESP2 client on `node:net`, written for the benchmark's floor: one
 * socket, commands written in batches (one `write` per tick), replies matched to callers in
 * order. It parses integers, simple and bulk strings, errors and flat arrays of those —
 * what SCRIPT LOAD and sluice's script answer — and nothing else. No deadline, no
 * reconnection, no validation.
 */
import { connect, type Socket } from 'node:net';

type Reply = number | string | null | Reply[];

interface Waiter {
  resolve(value: never): void;
  reject(error: Error): void;
}

const CR = 13;
const INCOMPLETE = Symbol('incomplete');

export class RespFloorClient {
  readonly #socket: Socket;
  readonly #waiters: Waiter[] = [];
  #head = 0;
  #buffer: Buffer | undefined;
  #outgoing = '';
  #offset = 0; // parse cursor into the current buffer
  readonly #flush = () => {
    const out = this.#outgoing;
    this.#outgoing = '';
    this.#socket.write(out);
  };

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (error) => this.#failAll(error));
    socket.on('close', () => this.#failAll(new Error('connection closed')));
  }

  /** Connects to `redis://host:port`. */
  static connect(url: string): Promise<RespFloorClient> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = connect({ host: hostname, port: Number(port) || 6379 });
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(new RespFloorClient(socket));
      });
    });
  }

  /** Sends any command; resolves with its reply. */
  command(args: readonly string[]): Promise<Reply> {
    let out = `*${args.length}\r\n`;
    for (const arg of args) out += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
    return this.#send(out);
  }

  /** `SCRIPT LOAD source`, resolving with the script's SHA-1. */
  async scriptLoad(source: string): Promise<string> {
    const sha = await this.command(['SCRIPT', 'LOAD', source]);
    if (typeof sha !== 'string') throw new Error(`unexpected SCRIPT LOAD reply: ${sha}`);
    return sha;
  }

  /**
   * A function sending `EVALSHA sha 1 <prefix><key> ...args`, with everything but the key
   * encoded once. Its promise resolves with the script's array reply.
   */
  evalshaTemplate(
    sha: string,
    keyPrefix: string,
    args: readonly string[],
  ): (key: string) => Promise<Reply[]> {
    const head = `*${4 + args.length}\r\n$7\r\nEVALSHA\r\n$${sha.length}\r\n${sha}\r\n$1\r\n1\r\n`;
    let tail = '';
    for (const arg of args) tail += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
    return (key) => {
      const fullKey = keyPrefix + key;
      return this.#send(`${head}$${Buffer.byteLength(fullKey)}\r\n${fullKey}\r\n${tail}`);
    };
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#socket.once('close', () => resolve());
      this.#socket.end();
    });
  }

  #send<T>(encoded: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.#socket.destroyed) {
        reject(new Error('connection closed'));
        return;
      }
      this.#waiters.push({ resolve, reject } as Waiter);
      // Batch every command issued in this tick into one write: the pipelining.
      if (this.#outgoing === '') process.nextTick(this.#flush);
      this.#outgoing += encoded;
    });
  }

  #onData(chunk: Buffer): void {
    const buffer = this.#buffer === undefined ? chunk : Buffer.concat([this.#buffer, chunk]);
    this.#offset = 0;
    while (this.#offset < buffer.length) {
      const start = this.#offset;
      const reply = this.#parse(buffer);
      if (reply === INCOMPLETE) {
        this.#offset = start;
        break;
      }
      const waiter = this.#waiters[this.#head++];
      if (this.#head === this.#waiters.length) {
        this.#waiters.length = 0;
        this.#head = 0;
      }
      if (waiter === undefined) continue; // a reply nobody asked for: ignore
      if (reply instanceof Error) waiter.reject(reply);
      else waiter.resolve(reply as never);
    }
    this.#buffer = this.#offset < buffer.length ? buffer.subarray(this.#offset) : undefined;
  }

  /** Parses one reply at the cursor, advancing it; INCOMPLETE when more bytes are needed. */
  #parse(buffer: Buffer): Reply | Error | typeof INCOMPLETE {
    const type = buffer[this.#offset];
    const lineEnd = buffer.indexOf(CR, this.#offset + 1);
    if (lineEnd < 0 || lineEnd + 1 >= buffer.length) return INCOMPLETE;
    const lineStart = this.#offset + 1;
    this.#offset = lineEnd + 2;
    switch (type) {
      case 0x3a: // ':' integer
        return parseInteger(buffer, lineStart, lineEnd);
      case 0x2b: // '+' simple string
        return buffer.toString('utf8', lineStart, lineEnd);
      case 0x2d: // '-' error
        return new Error(buffer.toString('utf8', lineStart, lineEnd));
      case 0x24: {
        // '$' bulk string
        const length = parseInteger(buffer, lineStart, lineEnd);
        if (length < 0) return null;
        if (this.#offset + length + 2 > buffer.length) return INCOMPLETE;
        const text = buffer.toString('utf8', this.#offset, this.#offset + length);
        this.#offset += length + 2;
        return text;
      }
      case 0x2a: {
        // '*' array
        const count = parseInteger(buffer, lineStart, lineEnd);
        if (count < 0) return null;
        const items: Reply[] = new Array(count);
        for (let i = 0; i < count; i++) {
          if (this.#offset >= buffer.length) return INCOMPLETE;
          const item = this.#parse(buffer);
          if (item === INCOMPLETE) return INCOMPLETE;
          if (item instanceof Error) return item;
          items[i] = item;
        }
        return items;
      }
      default:
        throw new Error(`unsupported RESP type byte ${type}`);
    }
  }

  #failAll(error: Error): void {
    const waiters = this.#waiters.splice(this.#head);
    this.#waiters.length = 0;
    this.#head = 0;
    for (const waiter of waiters) waiter.reject(error);
  }
}

/** A base-10 integer from ASCII bytes `[start, end)`, without making a string. */
function parseInteger(buffer: Buffer, start: number, end: number): number {
  let i = start;
  let sign = 1;
  if (buffer[i] === 0x2d) {
    sign = -1;
    i++;
  }
  let value = 0;
  for (; i < end; i++) value = value * 10 + ((buffer[i] as number) - 0x30);
  return sign * value;
}
