// @tier: pure
/**
 * `headerNameIs`, the byte-wise, case-insensitive header-name comparison the proxy uses on the
 * upstream's raw response headers instead of decoding each name to a string.
 */
import t from 'tap';
import { Buffer } from 'node:buffer';
import { headerNameIs } from '../../limiter/proxy.js';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

t.test('matches in any case, only the whole name', async (t) => {
  for (const n of ['content-length', 'Content-Length', 'CONTENT-LENGTH', 'cOnTeNt-LeNgTh']) t.ok(headerNameIs(b(n), 'content-length'), n);
  t.notOk(headerNameIs(b('content-lengths'), 'content-length'), 'longer');
  t.notOk(headerNameIs(b('content-lengt'), 'content-length'), 'shorter');
  t.notOk(headerNameIs(b('content_length'), 'content-length'), 'another separator');
  t.notOk(headerNameIs(b('dATE'), 'data'), 'same length, other name');
  t.notOk(headerNameIs(b(''), 'te'), 'empty');
});

t.test('folds only A-Z: bytes that are not letters compare as they are', async (t) => {
  // '@' (0x40) | 0x20 is '`' (0x60); '[' (0x5B) | 0x20 is '{' (0x7B): a careless fold would match these.
  t.notOk(headerNameIs(b('@'), '`'));
  t.notOk(headerNameIs(b('['), '{'));
  t.notOk(headerNameIs(b('\xc4'), '\xe4'), 'latin1 letters are not folded');
  t.ok(headerNameIs(b('X-1'), 'x-1'));
});
