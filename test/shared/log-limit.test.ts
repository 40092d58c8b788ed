// @tier: pure
import t from 'tap';
import { FakeClock } from '../../shared/clock.js';
import { LimitedLog } from '../../shared/log-limit.js';
import type { Logger } from '../../shared/log.js';

t.test('one line per interval; the held-back ones are counted on the next line written', (t) => {
  const lines: Array<{ fields: Record<string, unknown>; msg: string }> = [];
  const log = { warn: (fields: Record<string, unknown>, msg: string) => lines.push({ fields, msg }) } as unknown as Logger;
  const clock = new FakeClock(1_000_000);
  const limited = new LimitedLog(log, 'lease call to redis failed', clock, 1000);
  for (let i = 0; i < 100_000; i++) limited.warn({ err: { message: 'down' } });
  t.same(lines, [{ fields: { err: { message: 'down' } }, msg: 'lease call to redis failed' }], 'a burst writes one line');
  clock.advance(999);
  limited.warn({ err: { message: 'down' } });
  t.equal(lines.length, 1, 'still inside the interval');
  clock.advance(1);
  limited.warn({ err: { message: 'still down' } });
  t.same(lines[1], { fields: { err: { message: 'still down' }, suppressed: 100_000 }, msg: 'lease call to redis failed' });
  clock.advance(5000);
  limited.warn({ err: { message: 'again' } });
  t.same(lines[2]!.fields, { err: { message: 'again' } }, 'nothing held back: no count');
  t.end();
});
