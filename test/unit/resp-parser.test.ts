/**
 * The RESP2 reply parser of sluice's script connection (`src/stores/resp/parser.ts`): every
 * reply type, replies cut across chunks at every byte, many replies in one chunk, chunks
 * read into one reused buffer, and streams that are not RESP.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  encodeCommand,
  ProtocolError,
  ReplyError,
  ReplyParser,
} from '../../src/redis/resp/parser.js';

/** A comparable form of a reply: a ReplyError as `{ error: message }`. */
function plain(reply: unknown): unknown {
  if (reply instanceof ReplyError) return { error: reply.message };
  if (Array.isArray(reply)) return reply.map(plain);
  return reply;
}

/** Feeds `chunks` to a new parser; the replies, in order, in plain form. */
function parse(chunks: readonly Buffer[]): unknown[] {
  const replies: unknown[] = [];
  const parser = new ReplyParser((reply) => replies.push(plain(reply)));
  for (const chunk of chunks) parser.feed(chunk);
  assert.equal(parser.buffered, 0, 'no bytes left over');
  return replies;
}

/** A stream of replies and what each parses to. */
const STREAM: readonly [string, unknown][] = [
  ['+OK\r\n', 'OK'],
  [
    '-NOSCRIPT No matching script. Please use EVAL.\r\n',
    { error: 'NOSCRIPT No matching script. Please use EVAL.' },
  ],
  [':0\r\n', 0],
  [':-42\r\n', -42],
  [':1700000000123\r\n', 1_700_000_000_123],
  [':9007199254740993\r\n', Number('9007199254740993')],
  ['$5\r\nhello\r\n', 'hello'],
  ['$0\r\n\r\n', ''],
  ['$-1\r\n', null],
  ['$6\r\na\r\nb\r\n\r\n', 'a\r\nb\r\n'],
  [`$${Buffer.byteLength('héllo €')}\r\nhéllo €\r\n`, 'héllo €'],
  ['*0\r\n', []],
  ['*-1\r\n', null],
  ['*4\r\n:1\r\n:0\r\n:59999\r\n:1000\r\n', [1, 0, 59999, 1000]],
  [
    '*3\r\n*2\r\n:1\r\n$1\r\nx\r\n*-1\r\n*2\r\n-ERR inside\r\n+fine\r\n',
    [[1, 'x'], null, [{ error: 'ERR inside' }, 'fine']],
  ],
  ['*2\r\n$-1\r\n*1\r\n*0\r\n', [null, [[]]]],
];
const BYTES = Buffer.from(STREAM.map(([wire]) => wire).join(''));
const EXPECTED = STREAM.map(([, value]) => value);

describe('RESP2 reply parser', () => {
  it('parses every reply type, many in one chunk', () => {
    assert.deepEqual(parse([BYTES]), EXPECTED);
  });

  it('parses the stream cut into two chunks at every byte', () => {
    for (let cut = 0; cut <= BYTES.length; cut++) {
      assert.deepEqual(
        parse([BYTES.subarray(0, cut), BYTES.subarray(cut)]),
        EXPECTED,
        `cut at byte ${cut}`,
      );
    }
  });

  it('parses the stream fed one byte at a time, and in three chunks cut anywhere', () => {
    assert.deepEqual(parse(Array.from(BYTES, (_, i) => BYTES.subarray(i, i + 1))), EXPECTED);
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: BYTES.length }),
        fc.integer({ min: 0, max: BYTES.length }),
        (a, b) => {
          const [x, y] = a <= b ? [a, b] : [b, a];
          const chunks = [BYTES.subarray(0, x), BYTES.subarray(x, y), BYTES.subarray(y)];
          assert.deepEqual(parse(chunks), EXPECTED);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('a reply is delivered as soon as its last byte arrives, not before', () => {
    const replies: unknown[] = [];
    const parser = new ReplyParser((reply) => replies.push(reply));
    const wire = Buffer.from('*2\r\n:1\r\n$3\r\nabc\r\n');
    parser.feed(wire.subarray(0, wire.length - 1));
    assert.deepEqual(replies, []);
    assert.equal(parser.buffered, wire.length - 1);
    parser.feed(wire.subarray(wire.length - 1));
    assert.deepEqual(replies, [[1, 'abc']]);
  });

  it('keeps no chunk: every chunk read into one reused buffer, as a socket with onread does', () => {
    // The connection hands the parser a view of its one read buffer, overwritten by the next
    // read: what an incomplete reply keeps must be a copy.
    const scratch = Buffer.alloc(BYTES.length);
    const readInto = (cut: number[]) => {
      const replies: unknown[] = [];
      const parser = new ReplyParser((reply) => replies.push(plain(reply)));
      let from = 0;
      for (const to of [...cut, BYTES.length]) {
        scratch.fill(0x2a); // '*': what was there before must never be read again
        const length = BYTES.copy(scratch, 0, from, to);
        parser.feed(scratch.subarray(0, length));
        from = to;
      }
      return replies;
    };
    for (let a = 0; a < BYTES.length; a += 7) {
      for (let size = 1; size <= 64 && a + size <= BYTES.length; size += 9) {
        const cuts: number[] = [];
        for (let at = a; at < BYTES.length; at += size) if (at > 0) cuts.push(at);
        assert.deepEqual(readInto(cuts), EXPECTED, `chunks of ${size} from ${a}`);
      }
    }
  });

  it('a large bulk string in many chunks', () => {
    const text = 'x'.repeat(200_000);
    const wire = Buffer.from(`$${text.length}\r\n${text}\r\n:7\r\n`);
    const chunks: Buffer[] = [];
    for (let i = 0; i < wire.length; i += 997) chunks.push(wire.subarray(i, i + 997));
    assert.deepEqual(parse(chunks), [text, 7]);
  });

  it('a long array read in small pieces is not parsed again from its start on every piece', () => {
    // 10,000 elements of 2 values (about 280 KB), in reads of 16 bytes: before, every read
    // parsed the reply again from its start (17,000 parses, the work growing with the square
    // of the reply's size). Each parse of an incomplete reply joins the bytes held
    // (Buffer.concat), so those calls count the parses.
    const rows = Array.from({ length: 10_000 }, (_, i) => [i, `v${String(i).padStart(9, '0')}`]);
    const wire = Buffer.from(
      `*${rows.length}\r\n${rows.map(([n, v]) => `*2\r\n:${n}\r\n$10\r\n${v}\r\n`).join('')}`,
    );
    const chunks: Buffer[] = [];
    for (let i = 0; i < wire.length; i += 16) chunks.push(wire.subarray(i, i + 16));
    const concat = Buffer.concat;
    let parses = 0;
    Buffer.concat = (...args: Parameters<typeof concat>) => {
      parses++;
      return concat(...args);
    };
    let replies: unknown[];
    try {
      replies = parse(chunks);
    } finally {
      Buffer.concat = concat;
    }
    assert.deepEqual(replies, [rows]);
    assert.ok(parses < 500, `${parses} parses of ${chunks.length} reads`);
  });

  it('refuses a stream that is not RESP2', () => {
    for (const wire of ['?x\r\n', ':1x\r\n', ':\r\n', '$3\r\nabcd\r\n', '+OK\rX', '*1\r\n:-\r\n']) {
      const parser = new ReplyParser(() => {});
      assert.throws(() => parser.feed(Buffer.from(wire)), ProtocolError, JSON.stringify(wire));
    }
  });

  it('reset forgets a partial reply, also when called from a reply handler', () => {
    const replies: unknown[] = [];
    const parser = new ReplyParser((reply) => {
      replies.push(reply);
      if (reply === 'stop') parser.reset();
    });
    parser.feed(Buffer.from('$5\r\nhel'));
    parser.reset();
    parser.feed(Buffer.from('+stop\r\n:1\r\n'));
    assert.deepEqual(replies, ['stop']);
    assert.equal(parser.buffered, 0);
    parser.feed(Buffer.from(':2\r\n'));
    assert.deepEqual(replies, ['stop', 2]);
  });
});

describe('RESP2 command encoding', () => {
  it('is an array of bulk strings, lengths in bytes', () => {
    assert.equal(
      encodeCommand(['EVALSHA', 'abc', '1', 'k€y']),
      '*4\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$5\r\nk€y\r\n',
    );
    assert.equal(encodeCommand(['PING', '']), '*2\r\n$4\r\nPING\r\n$0\r\n\r\n');
  });

  it('encodes the same arguments the same way the second time (memoized), and every new one', () => {
    const args = (i: number) => ['EVALSHA', 'a'.repeat(40), '1', `k€y${i}`, '1000', '€', String(i)];
    const plainly = (list: readonly string[]) =>
      `*${list.length}\r\n${list.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
    // Past the memo's bound: arguments met after it is full are encoded all the same.
    for (let i = 0; i < 1200; i++) assert.equal(encodeCommand(args(i)), plainly(args(i)));
    for (let i = 0; i < 1200; i += 7) assert.equal(encodeCommand(args(i)), plainly(args(i)));
  });
});
