// @tier: pure
/**
 * RESP2 bytes (limiter/admission/resp-codec.ts): every reply type from raw bytes, each reply split
 * at every byte offset and fed byte by byte, several replies in one chunk, malformed bytes refused,
 * and the encoder's bytes as Redis reads them.
 */
import t from 'tap';
import {
  encodeCommand,
  RespError,
  RespParser,
  RespProtocolError,
  RespWriter,
  type RespValue,
} from '../../../limiter/admission/resp-codec.js';

function parseAll(chunks: Buffer[]): RespValue[] {
  const out: RespValue[] = [];
  const p = new RespParser((v) => out.push(v));
  for (const c of chunks) p.feed(c);
  t.equal(p.pending, 0, 'nothing held after complete replies');
  return out;
}

const b = (s: string) => Buffer.from(s, 'latin1');

const CASES: [string, string, RespValue][] = [
  ['integer', ':42\r\n', 42],
  ['negative integer', ':-7\r\n', -7],
  ['zero', ':0\r\n', 0],
  ['epoch ms', ':1795000000123\r\n', 1795000000123],
  ['2^53', ':9007199254740992\r\n', 9007199254740992],
  ['simple string', '+OK\r\n', 'OK'],
  ['empty simple string', '+\r\n', ''],
  ['bulk string', '$5\r\nhello\r\n', 'hello'],
  ['empty bulk string', '$0\r\n\r\n', ''],
  ['bulk string holding CRLF', '$4\r\na\r\nb\r\n', 'a\r\nb'],
  ['nil bulk', '$-1\r\n', null],
  ['nil array', '*-1\r\n', null],
  ['empty array', '*0\r\n', []],
  ['error', '-ERR wrong number of arguments\r\n', new RespError('ERR wrong number of arguments')],
  [
    'an admission reply',
    '*11\r\n:1\r\n:0\r\n:10\r\n:9\r\n:1795000001000\r\n:0\r\n:1795000000000\r\n:1\r\n:9000\r\n:1795000000000\r\n:1000\r\n',
    [1, 0, 10, 9, 1795000001000, 0, 1795000000000, 1, 9000, 1795000000000, 1000],
  ],
  [
    'nested arrays with every type',
    '*5\r\n:1\r\n*2\r\n$3\r\nabc\r\n*1\r\n:-2\r\n$-1\r\n-NOSCRIPT No matching script\r\n+PONG\r\n',
    [1, ['abc', [-2]], null, new RespError('NOSCRIPT No matching script'), 'PONG'],
  ],
];

t.test('every reply type, whole', async (t) => {
  for (const [name, bytes, want] of CASES) t.same(parseAll([b(bytes)]), [want], name);
  const [e] = parseAll([b('-NOSCRIPT No matching script. Please use EVAL.\r\n')]);
  t.type(e, RespError);
  t.equal((e as RespError).prefix, 'NOSCRIPT');
  t.same(parseAll([Buffer.from('$5\r\nsüß\r\n', 'utf8')]), ['süß'], 'bulk length in bytes, decoded as UTF-8');
});

t.test('split at every byte offset, and fed byte by byte', async (t) => {
  for (const [name, bytes, want] of CASES) {
    const all = b(bytes);
    for (let i = 1; i < all.length; i++) {
      t.same(parseAll([all.subarray(0, i), all.subarray(i)]), [want], `${name} split at ${i}`);
    }
    const bytewise = [...all].map((x) => Buffer.from([x]));
    t.same(parseAll(bytewise), [want], `${name} byte by byte`);
  }
});

t.test('several replies in one chunk, and a chunk ending inside the next', async (t) => {
  const all = b(CASES.map((c) => c[1]).join(''));
  const want = CASES.map((c) => c[2]);
  t.same(parseAll([all]), want, 'all in one chunk, in order');
  for (let i = 1; i < all.length; i += 7) {
    for (let j = i + 1; j < all.length; j += 11) {
      const got = parseAll([all.subarray(0, i), all.subarray(i, j), all.subarray(j)]);
      if (JSON.stringify(got) !== JSON.stringify(want)) t.fail(`split at ${i} and ${j}`);
    }
  }
  t.pass('every three-way split of the whole stream (strides 7 and 11) parses in order');
});

t.test('a large bulk string in many chunks is held, not re-parsed per chunk', async (t) => {
  const body = 'x'.repeat(100_000);
  const all = b(`$${body.length}\r\n${body}\r\n:1\r\n`);
  const out: RespValue[] = [];
  const p = new RespParser((v) => out.push(v));
  for (let i = 0; i < all.length; i += 1000) p.feed(all.subarray(i, i + 1000));
  t.same(out.length, 2);
  t.equal((out[0] as string).length, body.length);
  t.equal(out[1], 1);
});

t.test('malformed bytes are a protocol error', async (t) => {
  const bad: [string, string][] = [
    ['unknown type byte', '!oops\r\n'],
    ['RESP3 type', '%1\r\n'],
    ['letters in an integer', ':12a\r\n'],
    ['empty integer', ':\r\n'],
    ['CR without LF', ':1\rX'],
    ['bulk length below -1', '$-2\r\n'],
    ['bulk not ended by CRLF', '$3\r\nabcXY'],
    ['array length below -1', '*-5\r\n'],
    ['bad element in an array', '*2\r\n:1\r\n?\r\n'],
  ];
  for (const [name, bytes] of bad) {
    const p = new RespParser(() => undefined);
    t.throws(() => p.feed(b(bytes)), RespProtocolError, name);
  }
  // Replies before the bad bytes are delivered first.
  const out: RespValue[] = [];
  const p = new RespParser((v) => out.push(v));
  t.throws(() => p.feed(b(':1\r\n:2\r\n!\r\n')), RespProtocolError);
  t.same(out, [1, 2]);
});

t.test('the encoder writes what Redis reads', async (t) => {
  t.equal(encodeCommand(['PING']).toString('latin1'), '*1\r\n$4\r\nPING\r\n');
  t.equal(
    encodeCommand(['EVALSHA', 'abc', 1, 'rl:v1:{s0}:k:user:ü', 0, -12, 1795000000123, 1.5]).toString('utf8'),
    '*8\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$20\r\nrl:v1:{s0}:k:user:ü\r\n$1\r\n0\r\n$3\r\n-12\r\n$13\r\n1795000000123\r\n$3\r\n1.5\r\n',
    'numbers in decimal, a non-ASCII key by its UTF-8 length',
  );
  // Numbers of every digit count, negative too.
  for (let d = 0; d < 16; d++) {
    for (const n of [10 ** d, 10 ** d - 1, -(10 ** d), 2 ** 53 - 1]) {
      const s = String(n);
      t.equal(encodeCommand([n]).toString('latin1'), `*1\r\n$${s.length}\r\n${s}\r\n`);
    }
  }
  // Commands across a full slab: the unsent bytes move to a new slab, nothing lost.
  const w = new RespWriter(64);
  const parts: Buffer[] = [];
  for (let i = 0; i < 50; i++) {
    w.reserve(16);
    w.arrayHeader(2);
    w.bulk(`key:${i}`);
    w.bulkNumber(i);
    if (i % 7 === 0) parts.push(Buffer.from(w.take()!));
  }
  w.reserve(16);
  w.arrayHeader(1);
  w.bulk('end');
  parts.push(Buffer.from(w.take()!));
  const want =
    Array.from({ length: 50 }, (_, i) => `*2\r\n$${`key:${i}`.length}\r\nkey:${i}\r\n$${String(i).length}\r\n${i}\r\n`).join('') +
    '*1\r\n$3\r\nend\r\n';
  t.equal(Buffer.concat(parts).toString('latin1'), want);
  t.equal(w.take(), undefined, 'nothing left');
});
