// @tier: pure
/**
 * Quiet hours in the user's zone: the clock-time parser, ordinary days in several zones (whole,
 * half and three-quarter hour offsets), every kind of clock change in Europe/Paris,
 * America/New_York and Australia/Sydney (spring forward: a long window, an end and a start in the
 * skipped hour; fall back: a long window, an end and a start in the repeated hour, both passes),
 * and a property against a reference model of the wall clock built on formatToParts.
 */
import t, { type Test } from 'tap';
import fc from 'fast-check';
import {
  localMinutes,
  parseClockTime,
  parseQuietWindow,
  quietHoursRelease,
  type QuietWindow,
} from '../../../notifier/policy/quiet-hours.js';

const MIN = 60_000;
const HOUR = 3_600_000;

function at(iso: string): number {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`bad ISO instant in test: ${iso}`);
  return ms;
}

function win(start: string, end: string): QuietWindow {
  const w = parseQuietWindow(start, end);
  if (!w) throw new Error(`bad window in test: ${start}–${end}`);
  return w;
}

const show = (ms: number | undefined) => (ms === undefined ? 'outside' : new Date(ms).toISOString());

/** Asserts the release for `now` (ISO with offset) is `expected` (ISO with offset), or outside. */
function release(tt: Test, zone: string, w: QuietWindow, now: string, expected: string | undefined): void {
  const r = quietHoursRelease(at(now), zone, w);
  tt.equal(show(r), show(expected === undefined ? undefined : at(expected)), `${zone} ${now} → ${expected ?? 'outside'}`);
}

const NIGHT = win('22:00', '07:00');

t.test('parseClockTime', async (t) => {
  t.equal(parseClockTime('00:00'), 0);
  t.equal(parseClockTime('07:00'), 420);
  t.equal(parseClockTime('13:05'), 785);
  t.equal(parseClockTime('22:00'), 1320);
  t.equal(parseClockTime('23:59'), 1439);
  for (const bad of ['24:00', '7:00', '07:60', '7:5', ' 07:00', '07:00 ', '', '0700', '07:00:00', '07-00', '+7:00', '٠٧:٠٠', '07:0a']) {
    t.equal(parseClockTime(bad), undefined, JSON.stringify(bad));
  }
});

t.test('parseQuietWindow', async (t) => {
  t.same(parseQuietWindow('22:00', '07:00'), { startMin: 1320, endMin: 420 });
  t.same(parseQuietWindow('13:00', '14:00'), { startMin: 780, endMin: 840 });
  t.equal(parseQuietWindow('07:00', '07:00'), undefined, 'start = end is not a window');
  t.equal(parseQuietWindow('22:00', '7:00'), undefined);
  t.equal(parseQuietWindow('24:00', '07:00'), undefined);
});

t.test('a window within one day, in UTC', async (t) => {
  const w = win('13:00', '14:00');
  release(t, 'UTC', w, '2026-05-04T12:59:59.999Z', undefined);
  release(t, 'UTC', w, '2026-05-04T13:00:00Z', '2026-05-04T14:00:00Z');
  release(t, 'UTC', w, '2026-05-04T13:30:00Z', '2026-05-04T14:00:00Z');
  release(t, 'UTC', w, '2026-05-04T13:59:59.999Z', '2026-05-04T14:00:00Z');
  release(t, 'UTC', w, '2026-05-04T14:00:00Z', undefined);
  release(t, 'UTC', w, '2026-05-04T23:30:00Z', undefined);
  release(t, 'UTC', w, '2026-05-05T01:00:00Z', undefined);
});

t.test('22:00–07:00 on ordinary days, both sides of midnight', async (t) => {
  // Europe/Paris in winter (+01:00) and summer (+02:00).
  release(t, 'Europe/Paris', NIGHT, '2026-01-15T21:59:59+01:00', undefined);
  release(t, 'Europe/Paris', NIGHT, '2026-01-15T22:00:00+01:00', '2026-01-16T07:00:00+01:00');
  release(t, 'Europe/Paris', NIGHT, '2026-01-15T23:59:59+01:00', '2026-01-16T07:00:00+01:00');
  release(t, 'Europe/Paris', NIGHT, '2026-01-16T00:00:00+01:00', '2026-01-16T07:00:00+01:00');
  release(t, 'Europe/Paris', NIGHT, '2026-01-16T06:59:30+01:00', '2026-01-16T07:00:00+01:00');
  release(t, 'Europe/Paris', NIGHT, '2026-01-16T07:00:00+01:00', undefined);
  release(t, 'Europe/Paris', NIGHT, '2026-07-10T23:15:00+02:00', '2026-07-11T07:00:00+02:00');
  release(t, 'Europe/Paris', NIGHT, '2026-07-11T03:00:00+02:00', '2026-07-11T07:00:00+02:00');
  release(t, 'Europe/Paris', NIGHT, '2026-07-11T12:00:00+02:00', undefined);
  // America/New_York in winter (-05:00) and summer (-04:00).
  release(t, 'America/New_York', NIGHT, '2026-01-15T21:59:00-05:00', undefined);
  release(t, 'America/New_York', NIGHT, '2026-01-15T22:00:00-05:00', '2026-01-16T07:00:00-05:00');
  release(t, 'America/New_York', NIGHT, '2026-01-16T02:00:00-05:00', '2026-01-16T07:00:00-05:00');
  release(t, 'America/New_York', NIGHT, '2026-01-16T07:00:00-05:00', undefined);
  release(t, 'America/New_York', NIGHT, '2026-07-10T22:30:00-04:00', '2026-07-11T07:00:00-04:00');
  release(t, 'America/New_York', NIGHT, '2026-07-11T06:59:59.999-04:00', '2026-07-11T07:00:00-04:00');
  release(t, 'America/New_York', NIGHT, '2026-07-11T07:00:00-04:00', undefined);
  // The same instant, judged by each user's own wall: 04:00Z is 05:00 in Paris, 23:00 in New York.
  release(t, 'Europe/Paris', NIGHT, '2026-01-16T04:00:00Z', '2026-01-16T07:00:00+01:00');
  release(t, 'America/New_York', NIGHT, '2026-01-16T04:00:00Z', '2026-01-16T07:00:00-05:00');
  release(t, 'UTC', NIGHT, '2026-01-16T04:00:00Z', '2026-01-16T07:00:00Z');
  release(t, 'Asia/Tokyo', NIGHT, '2026-01-16T04:00:00Z', undefined); // 13:00 in Tokyo
});

t.test('zones with half and three-quarter hour offsets', async (t) => {
  release(t, 'Asia/Kolkata', NIGHT, '2026-05-10T21:59:00+05:30', undefined);
  release(t, 'Asia/Kolkata', NIGHT, '2026-05-10T23:15:00+05:30', '2026-05-11T07:00:00+05:30');
  release(t, 'Asia/Kolkata', NIGHT, '2026-05-11T07:00:00+05:30', undefined);
  const lunch = win('13:00', '14:00');
  release(t, 'Asia/Kathmandu', lunch, '2026-05-10T12:59:00+05:45', undefined);
  release(t, 'Asia/Kathmandu', lunch, '2026-05-10T13:30:00+05:45', '2026-05-10T14:00:00+05:45');
  t.equal(quietHoursRelease(at('2026-05-10T07:30:00Z'), 'Asia/Kathmandu', lunch), at('2026-05-10T08:15:00Z'));
  t.equal(localMinutes(at('2026-05-10T07:30:00Z'), 'Asia/Kathmandu'), 13 * 60 + 15);
  t.equal(localMinutes(at('2026-05-10T00:59:30Z'), 'Asia/Kolkata'), 6 * 60 + 29.5, 'seconds count');
});

t.test('spring forward, Europe/Paris 2026-03-29 02:00 → 03:00', async (t) => {
  const zone = 'Europe/Paris';
  // The long window ends at 07:00 local, an hour sooner than on other nights.
  release(t, zone, NIGHT, '2026-03-28T22:00:00+01:00', '2026-03-29T07:00:00+02:00');
  release(t, zone, NIGHT, '2026-03-29T01:59:59+01:00', '2026-03-29T07:00:00+02:00');
  release(t, zone, NIGHT, '2026-03-29T03:00:00+02:00', '2026-03-29T07:00:00+02:00');
  release(t, zone, NIGHT, '2026-03-29T07:00:00+02:00', undefined);
  t.equal(at('2026-03-29T07:00:00+02:00') - at('2026-03-28T22:00:00+01:00'), 8 * HOUR, 'the night is 8 h, not 9');
  t.equal(quietHoursRelease(at('2026-03-28T22:00:00+01:00'), zone, NIGHT), at('2026-03-28T22:00:00+01:00') + 8 * HOUR);

  // An end in the skipped hour: the window ends at the jump, the first instant past 02:30 on the wall.
  const endInGap = win('22:00', '02:30');
  release(t, zone, endInGap, '2026-03-28T23:00:00+01:00', '2026-03-29T03:00:00+02:00');
  release(t, zone, endInGap, '2026-03-29T01:59:00+01:00', '2026-03-29T03:00:00+02:00');
  release(t, zone, endInGap, '2026-03-29T01:59:59.999+01:00', '2026-03-29T01:00:00Z');
  release(t, zone, endInGap, '2026-03-29T03:00:00+02:00', undefined);

  // A start in the skipped hour: the window begins at the jump.
  const startInGap = win('02:30', '06:00');
  release(t, zone, startInGap, '2026-03-29T01:59:00+01:00', undefined);
  release(t, zone, startInGap, '2026-03-29T01:59:59.999+01:00', undefined);
  release(t, zone, startInGap, '2026-03-29T03:00:00+02:00', '2026-03-29T06:00:00+02:00');
  release(t, zone, startInGap, '2026-03-29T05:59:00+02:00', '2026-03-29T06:00:00+02:00');
  t.equal(localMinutes(at('2026-03-29T01:00:00Z'), zone), 180, 'the jump is 03:00 on the wall');
});

t.test('spring forward, America/New_York 2026-03-08 02:00 → 03:00', async (t) => {
  const zone = 'America/New_York';
  release(t, zone, NIGHT, '2026-03-07T22:00:00-05:00', '2026-03-08T07:00:00-04:00');
  release(t, zone, NIGHT, '2026-03-08T01:30:00-05:00', '2026-03-08T07:00:00-04:00');
  release(t, zone, NIGHT, '2026-03-08T03:00:00-04:00', '2026-03-08T07:00:00-04:00');
  t.equal(at('2026-03-08T07:00:00-04:00') - at('2026-03-07T22:00:00-05:00'), 8 * HOUR, 'the night is 8 h, not 9');

  const endInGap = win('23:00', '02:30');
  release(t, zone, endInGap, '2026-03-07T23:00:00-05:00', '2026-03-08T03:00:00-04:00');
  release(t, zone, endInGap, '2026-03-08T01:59:00-05:00', '2026-03-08T03:00:00-04:00');
  release(t, zone, endInGap, '2026-03-08T03:00:00-04:00', undefined);

  const startInGap = win('02:30', '06:00');
  release(t, zone, startInGap, '2026-03-08T01:59:00-05:00', undefined);
  release(t, zone, startInGap, '2026-03-08T03:00:00-04:00', '2026-03-08T06:00:00-04:00');
});

t.test('fall back, Europe/Paris 2026-10-25 03:00 → 02:00', async (t) => {
  const zone = 'Europe/Paris';
  // The long window ends at 07:00 local, an hour later than on other nights.
  release(t, zone, NIGHT, '2026-10-24T22:00:00+02:00', '2026-10-25T07:00:00+01:00');
  release(t, zone, NIGHT, '2026-10-24T22:30:00+02:00', '2026-10-25T07:00:00+01:00');
  release(t, zone, NIGHT, '2026-10-24T23:30:00+02:00', '2026-10-25T07:00:00+01:00');
  release(t, zone, NIGHT, '2026-10-25T02:30:00+02:00', '2026-10-25T07:00:00+01:00');
  release(t, zone, NIGHT, '2026-10-25T02:30:00+01:00', '2026-10-25T07:00:00+01:00');
  const start = at('2026-10-24T22:00:00+02:00');
  t.equal(quietHoursRelease(start, zone, NIGHT), start + 10 * HOUR, 'the night is 10 h, not 9');
  const ordinary = at('2026-10-17T22:00:00+02:00');
  t.equal(quietHoursRelease(ordinary, zone, NIGHT), ordinary + 9 * HOUR, 'a week earlier it is 9 h');

  // An end in the repeated hour is met on both passes.
  const w = win('23:00', '02:30');
  release(t, zone, w, '2026-10-24T23:30:00+02:00', '2026-10-25T02:30:00+02:00');
  release(t, zone, w, '2026-10-25T02:10:00+02:00', '2026-10-25T02:30:00+02:00');
  release(t, zone, w, '2026-10-25T02:40:00+02:00', undefined);
  release(t, zone, w, '2026-10-25T02:59:59.999+02:00', undefined);
  release(t, zone, w, '2026-10-25T02:00:00+01:00', '2026-10-25T02:30:00+01:00');
  release(t, zone, w, '2026-10-25T02:10:00+01:00', '2026-10-25T02:30:00+01:00');
  release(t, zone, w, '2026-10-25T02:30:00+01:00', undefined);
});

t.test('fall back, America/New_York 2026-11-01 02:00 → 01:00', async (t) => {
  const zone = 'America/New_York';
  release(t, zone, NIGHT, '2026-10-31T22:00:00-04:00', '2026-11-01T07:00:00-05:00');
  release(t, zone, NIGHT, '2026-11-01T01:30:00-04:00', '2026-11-01T07:00:00-05:00');
  release(t, zone, NIGHT, '2026-11-01T01:30:00-05:00', '2026-11-01T07:00:00-05:00');
  const start = at('2026-10-31T22:00:00-04:00');
  t.equal(quietHoursRelease(start, zone, NIGHT), start + 10 * HOUR, 'the night is 10 h, not 9');

  // The example in the module comment: 23:00–01:30, followed on the wall on both passes.
  const w = win('23:00', '01:30');
  release(t, zone, w, '2026-10-31T23:00:00-04:00', '2026-11-01T01:30:00-04:00');
  release(t, zone, w, '2026-11-01T01:10:00-04:00', '2026-11-01T01:30:00-04:00');
  release(t, zone, w, '2026-11-01T01:30:00-04:00', undefined);
  release(t, zone, w, '2026-11-01T01:40:00-04:00', undefined);
  release(t, zone, w, '2026-11-01T01:59:59.999-04:00', undefined);
  release(t, zone, w, '2026-11-01T01:00:00-05:00', '2026-11-01T01:30:00-05:00');
  release(t, zone, w, '2026-11-01T01:29:00-05:00', '2026-11-01T01:30:00-05:00');
  release(t, zone, w, '2026-11-01T01:30:00-05:00', undefined);

  // A start in the repeated hour: the window is left when the clock goes back before it.
  const startInRepeat = win('01:15', '03:00');
  release(t, zone, startInRepeat, '2026-11-01T01:10:00-04:00', undefined);
  release(t, zone, startInRepeat, '2026-11-01T01:20:00-04:00', '2026-11-01T01:00:00-05:00');
  release(t, zone, startInRepeat, '2026-11-01T01:59:00-04:00', '2026-11-01T06:00:00Z');
  release(t, zone, startInRepeat, '2026-11-01T01:00:00-05:00', undefined);
  release(t, zone, startInRepeat, '2026-11-01T01:15:00-05:00', '2026-11-01T03:00:00-05:00');

  // An end at the hour the clock leaves (02:00 EDT is never shown): met at 02:00 EST.
  const endAtChange = win('23:00', '02:00');
  release(t, zone, endAtChange, '2026-11-01T01:30:00-04:00', '2026-11-01T02:00:00-05:00');
  release(t, zone, endAtChange, '2026-11-01T01:30:00-05:00', '2026-11-01T02:00:00-05:00');
});

t.test('southern hemisphere, Australia/Sydney', async (t) => {
  const zone = 'Australia/Sydney';
  // DST ends 2026-04-05 03:00 AEDT → 02:00 AEST: a 10-hour night.
  release(t, zone, NIGHT, '2026-04-04T22:00:00+11:00', '2026-04-05T07:00:00+10:00');
  t.equal(at('2026-04-05T07:00:00+10:00') - at('2026-04-04T22:00:00+11:00'), 10 * HOUR);
  const w = win('23:00', '02:30');
  release(t, zone, w, '2026-04-05T02:10:00+11:00', '2026-04-05T02:30:00+11:00');
  release(t, zone, w, '2026-04-05T02:40:00+11:00', undefined);
  release(t, zone, w, '2026-04-05T02:10:00+10:00', '2026-04-05T02:30:00+10:00');
  // DST starts 2026-10-04 02:00 AEST → 03:00 AEDT: an 8-hour night; an end at 02:30 ends at the jump.
  release(t, zone, NIGHT, '2026-10-03T22:00:00+10:00', '2026-10-04T07:00:00+11:00');
  t.equal(at('2026-10-04T07:00:00+11:00') - at('2026-10-03T22:00:00+10:00'), 8 * HOUR);
  release(t, zone, w, '2026-10-04T01:30:00+10:00', '2026-10-04T03:00:00+11:00');
  release(t, zone, win('02:30', '06:00'), '2026-10-04T01:59:00+10:00', undefined);
  release(t, zone, win('02:30', '06:00'), '2026-10-04T03:00:00+11:00', '2026-10-04T06:00:00+11:00');
});

t.test('a half-hour clock change, Australia/Lord_Howe 2026-04-05 02:00 → 01:30', async (t) => {
  release(t, 'Australia/Lord_Howe', NIGHT, '2026-04-04T22:00:00+11:00', '2026-04-05T07:00:00+10:30');
  t.equal(at('2026-04-05T07:00:00+10:30') - at('2026-04-04T22:00:00+11:00'), 9.5 * HOUR);
  const w = win('23:00', '01:45');
  release(t, 'Australia/Lord_Howe', w, '2026-04-05T01:50:00+11:00', undefined);
  release(t, 'Australia/Lord_Howe', w, '2026-04-05T01:35:00+10:30', '2026-04-05T01:45:00+10:30');
});

t.test('refusals', async (t) => {
  t.throws(() => quietHoursRelease(0, 'Mars/Olympus', NIGHT), RangeError, 'a zone Intl does not know');
  t.throws(() => quietHoursRelease(0, 'Europe/Pariss', NIGHT), RangeError);
  t.throws(() => quietHoursRelease(0, '', NIGHT), RangeError);
  t.throws(() => localMinutes(0, 'Mars/Olympus'), RangeError);
  t.throws(() => quietHoursRelease(0, 'UTC', { startMin: 420, endMin: 420 }), RangeError, 'start = end');
  t.throws(() => quietHoursRelease(0, 'UTC', { startMin: 1440, endMin: 420 }), RangeError);
  t.throws(() => quietHoursRelease(0, 'UTC', { startMin: 1.5, endMin: 420 }), RangeError);
  t.throws(() => quietHoursRelease(Number.NaN, 'UTC', NIGHT), RangeError);
  t.equal(
    quietHoursRelease(at('2026-01-01T23:00:00+01:00'), 'europe/paris', NIGHT),
    at('2026-01-02T07:00:00+01:00'),
    'Intl matches names without case',
  );
});

// ---- Property: against a reference wall clock (formatToParts), over 2026 and its clock changes.

const ZONES = [
  'UTC',
  'Europe/Paris',
  'America/New_York',
  'Australia/Sydney',
  'Australia/Lord_Howe',
  'Asia/Kolkata',
  'Asia/Kathmandu',
  'America/St_Johns',
  'Pacific/Chatham',
  'America/Santiago',
];

const refFormats = new Map<string, Intl.DateTimeFormat>();

/** The reference: local time of day in ms, from formatToParts, independent of the module. */
function refTimeOfDay(ms: number, zone: string): number {
  let f = refFormats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
    refFormats.set(zone, f);
  }
  const part = (type: string) => Number(f.formatToParts(ms).find((p) => p.type === type)?.value);
  return ((part('hour') * 60 + part('minute')) * 60 + part('second')) * 1000 + (((ms % 1000) + 1000) % 1000);
}

function refInside(ms: number, zone: string, w: QuietWindow): boolean {
  const tod = refTimeOfDay(ms, zone);
  const s = w.startMin * MIN;
  const e = w.endMin * MIN;
  return s < e ? tod >= s && tod < e : tod >= s || tod < e;
}

const YEAR_START = at('2026-01-01T00:00:00Z');
const YEAR_END = at('2027-01-01T00:00:00Z');
// Instants near 2026's clock changes in the zones above, so that most runs meet one.
const CHANGES = [
  '2026-03-29T01:00:00Z', // Paris
  '2026-10-25T01:00:00Z',
  '2026-03-08T07:00:00Z', // New York
  '2026-11-01T06:00:00Z',
  '2026-04-04T16:00:00Z', // Sydney
  '2026-10-03T16:00:00Z',
  '2026-04-04T15:00:00Z', // Lord Howe
  '2026-10-03T15:30:00Z',
  '2026-03-08T05:30:00Z', // St John's
  '2026-11-01T04:30:00Z',
  '2026-04-04T14:00:00Z', // Chatham
  '2026-09-26T14:00:00Z',
  '2026-04-05T03:00:00Z', // Santiago
  '2026-09-06T04:00:00Z',
].map(at);

const instantArb = fc.oneof(
  fc.integer({ min: YEAR_START, max: YEAR_END }),
  fc.tuple(fc.constantFrom(...CHANGES), fc.integer({ min: -26 * HOUR, max: 2 * HOUR })).map(([c, d]) => c + d),
);
// Windows whose outside part is longer than any clock change (here at most an hour), so the wall is
// outside at least once a day; plus the shapes the examples use.
const windowArb = fc.oneof(
  fc
    .tuple(fc.integer({ min: 0, max: 1439 }), fc.integer({ min: 1, max: 1440 - 61 }))
    .map(([s, len]) => ({ startMin: s, endMin: (s + len) % 1440 })),
  fc.constantFrom(NIGHT, win('23:00', '01:30'), win('22:00', '02:30'), win('02:30', '06:00'), win('01:15', '03:00'), win('13:00', '14:00')),
);

t.test('property: the release is the first instant after now that the reference wall clock puts outside', async (t) => {
  let held = 0;
  let runs = 0;
  fc.assert(
    fc.property(instantArb, fc.constantFrom(...ZONES), windowArb, (now, zone, w) => {
      runs++;
      const r = quietHoursRelease(now, zone, w);
      if (r === undefined) {
        if (refInside(now, zone, w)) throw new Error('outside by the module, inside by the reference');
        return;
      }
      held++;
      if (!refInside(now, zone, w)) throw new Error('inside by the module, outside by the reference');
      if (!(r > now)) throw new Error(`release ${r} not after now`);
      if (r - now > 25 * HOUR) throw new Error(`release ${(r - now) / HOUR} h away`);
      if (refInside(r, zone, w)) throw new Error('inside at the release');
      if (!refInside(r - 1, zone, w)) throw new Error('outside 1 ms before the release');
      // Every minute from now to the release is inside (clock changes fall on whole minutes).
      for (let m = Math.ceil(now / MIN) * MIN; m < r; m += MIN) {
        if (!refInside(m, zone, w)) throw new Error(`outside at ${new Date(m).toISOString()}, before the release`);
      }
      // Any instant before the release has the same release; the release itself is outside.
      const mid = now + Math.floor((r - now) / 2);
      if (quietHoursRelease(mid, zone, w) !== r) throw new Error('the midpoint has another release');
      if (quietHoursRelease(r - 1, zone, w) !== r) throw new Error('1 ms before has another release');
      if (quietHoursRelease(r, zone, w) !== undefined) throw new Error('inside at the release');
    }),
    { numRuns: 600 },
  );
  t.equal(runs, 600);
  t.ok(held > 100, `enough held instants to mean something (${held})`);
});
