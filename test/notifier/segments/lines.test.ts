/**
 * The upload line reader (notifier/segments/lines.ts), pure: lines split across chunks at every
 * byte, CRLF, a BOM, blank lines, the CSV header only on line 1, and one fixture per malformed
 * line with the exact field and message.
 */
import t from 'tap';
import { Buffer } from 'node:buffer';
import { isPlatformError } from '../../../shared/errors.js';
import { LineReader, MAX_LINE_BYTES, parseLine, uploadFormat, type UploadFormat } from '../../../notifier/segments/lines.js';

function readAll(format: UploadFormat, body: string | Buffer, chunkSize: number): string[] {
  const buf = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const r = new LineReader(format);
  const out: string[] = [];
  for (let i = 0; i < buf.length; i += chunkSize) out.push(...r.feed(buf.subarray(i, i + chunkSize)));
  out.push(...r.end());
  return out;
}

t.test('the same ids whatever the chunking', async (t) => {
  const nd = '\ufeff"a"\r\n{"user_id":"b","x":1}\n\n  \n"c"';
  const csv = '\ufeffuser_id\r\na\r\n"b"\n\n"c""d"';
  for (let n = 1; n <= 12; n++) {
    t.same(readAll('ndjson', nd, n), ['a', 'b', 'c'], `ndjson in chunks of ${n}`);
    t.same(readAll('csv', csv, n), ['a', 'b', 'c"d'], `csv in chunks of ${n}`);
  }
});

t.test('a CSV value user_id is a header on line 1 only', async (t) => {
  t.same(readAll('csv', 'user_id\nuser_id\n', 64), ['user_id']);
  t.equal(parseLine('csv', 'user_id', 1), undefined);
  t.equal(parseLine('csv', 'user_id', 2), 'user_id');
});

t.test('content types', async (t) => {
  t.equal(uploadFormat('application/x-ndjson'), 'ndjson');
  t.equal(uploadFormat('Application/X-NDJSON; charset=utf-8'), 'ndjson');
  t.equal(uploadFormat('text/csv;header=present'), 'csv');
  t.equal(uploadFormat('application/json'), undefined);
  t.equal(uploadFormat(undefined), undefined);
});

t.test('one fixture per malformed line: field and message', async (t) => {
  const cases: [UploadFormat, string, string, string][] = [
    [
      'ndjson',
      '"a"\nnope\n',
      'line 2',
      'line 2: is not JSON: send a JSON string ("alice") or an object with user_id ({"user_id": "alice"})',
    ],
    ['ndjson', '[1]\n', 'line 1', 'line 1: must be a JSON string or an object with a string user_id'],
    ['ndjson', 'null\n', 'line 1', 'line 1: must be a JSON string or an object with a string user_id'],
    ['ndjson', '{"user_id": 7}\n', 'line 1', 'line 1: must be a JSON string or an object with a string user_id'],
    ['ndjson', '""\n', 'line 1', 'line 1: a user id must be 1 to 256 visible ASCII characters'],
    ['ndjson', `"${'x'.repeat(257)}"\n`, 'line 1', 'line 1: a user id must be 1 to 256 visible ASCII characters'],
    ['ndjson', '"caf\u00e9"\n', 'line 1', 'line 1: a user id must be 1 to 256 visible ASCII characters'],
    ['csv', '\n\na,b\n', 'line 3', 'line 3: has more than one column; a segment upload has one (user_id)'],
    ['csv', '"a",\n', 'line 1', 'line 1: has more than one column; a segment upload has one (user_id)'],
    ['csv', '"a"b\n', 'line 1', 'line 1: has text after a quoted value'],
    ['csv', 'a"b\n', 'line 1', 'line 1: has a quote inside an unquoted value'],
    ['csv', '"ab\n', 'line 1', 'line 1: has a quoted value that does not end on its line'],
    ['csv', 'a b\n', 'line 1', 'line 1: a user id must be 1 to 256 visible ASCII characters'],
    ['csv', `ok\n${'y'.repeat(MAX_LINE_BYTES + 1)}\n`, 'line 2', `line 2: is longer than ${MAX_LINE_BYTES} bytes`],
    ['csv', `ok\n${'y'.repeat(MAX_LINE_BYTES + 10)}`, 'line 2', `line 2: is longer than ${MAX_LINE_BYTES} bytes`],
  ];
  for (const [format, body, field, detail] of cases) {
    for (const chunk of [1, 3, 1 << 16]) {
      try {
        readAll(format, body, chunk);
        t.fail(`${JSON.stringify(body.slice(0, 30))} was accepted`);
      } catch (err) {
        t.ok(isPlatformError(err) && err.code === 'invalid_field', 'invalid_field');
        t.match(err, { field, detail }, `${format} ${JSON.stringify(body.slice(0, 30))} (chunks of ${chunk})`);
      }
    }
  }
});

t.test('a partial line is never held past the line limit', async (t) => {
  const r = new LineReader('csv');
  t.throws(() => {
    for (let i = 0; i < 100; i++) r.feed(Buffer.alloc(1024, 0x61));
  }, /longer than 4096 bytes/);
});
