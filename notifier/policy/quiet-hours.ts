/**
 * Quiet hours: whether an instant falls inside a user's quiet window, and when the hold ends.
 *
 * A window is two local wall-clock times, `start` and `end` (`"22:00"`–`"07:00"`, 24-hour `HH:MM`),
 * read in the user's IANA time zone (`UTC` when unknown). Quiet hours follow the clock on the
 * user's wall:
 *
 * - **Inside.** Let t be the local time of day at the instant, seconds included (06:59:30 is inside a
 *   window ending 07:00). t is inside when start ≤ t < end; for a window that crosses midnight
 *   (start > end), when t ≥ start or t < end. start = end is not a window.
 * - **Release.** A held notification is released at the first instant after now at which the wall
 *   clock is no longer inside the window. On most days that is the instant the clock shows `end`.
 * - **Spring forward** (the clock jumps, e.g. Paris 02:00 → 03:00): a 22:00–07:00 window still ends
 *   at 07:00 local, one hour sooner in absolute time. An `end` inside the skipped hour (02:30) ends
 *   the window at the jump (03:00 local, the first instant whose wall time is past 02:30). A `start`
 *   inside the skipped hour (02:30–06:00) begins the window at the jump: 01:59 is outside, 03:00 is
 *   inside.
 * - **Fall back** (the clock repeats an hour, e.g. New York 02:00 EDT → 01:00 EST): a 22:00–07:00
 *   window ends at 07:00 local, one hour later in absolute time. An `end` inside the repeated hour is
 *   met on each pass: for a 23:00–01:30 window in New York, 01:10 EDT is released at 01:30 EDT,
 *   01:40 EDT is outside, and when the clock returns to 01:00 EST the window is entered again, to be
 *   released at 01:30 EST. Likewise a `start` inside the repeated hour is left when the clock goes
 *   back before it (01:15–03:00: 01:50 EDT is released at the jump, 02:00 EDT = 01:00 EST). An
 *   `end` at the very time the clock leaves (02:00 in New York that night) is not shown before the
 *   change, so a 23:00–02:00 window ends at 02:00 EST.
 *
 * A release is at most about 25 hours after now: a window is shorter than a day, lengthened by the
 * clock change (an hour in most zones). The one exception: a window whose outside part fits inside a
 * skipped hour (03:00–02:30 in Paris) is never left on that night, and is released the day after.
 *
 * Pure: the instant is a parameter, nothing is read from the clock or the outside. Zones come from
 * this runtime's Intl (ICU) time-zone data; an unknown zone is a RangeError (the profile layer
 * refuses such zones when they are written, so reaching here with one is a programming error).
 */

const MINUTE = 60_000;
const DAY = 86_400_000;

/** Minutes since local midnight for `"HH:MM"` (00:00–23:59, two digits each), or undefined. */
export function parseClockTime(s: string): number | undefined {
  const m = /^([01][0-9]|2[0-3]):([0-5][0-9])$/.exec(s);
  if (!m) return undefined;
  return Number(m[1]) * 60 + Number(m[2]);
}

/** A quiet window in minutes of the local day (0–1439 each, start ≠ end; start > end crosses midnight). */
export interface QuietWindow {
  startMin: number;
  endMin: number;
}

/** The window for `{ start, end }` as stored (`"22:00"`, `"07:00"`), or undefined when either is malformed or they are equal. */
export function parseQuietWindow(start: string, end: string): QuietWindow | undefined {
  const startMin = parseClockTime(start);
  const endMin = parseClockTime(end);
  if (startMin === undefined || endMin === undefined || startMin === endMin) return undefined;
  return { startMin, endMin };
}

/**
 * If the instant `nowMs` (epoch ms) is inside the window in `timeZone`, the epoch ms at which the
 * window ends (the hold's release time, always after `nowMs`); undefined when outside. See the
 * module comment for days when the clock changes.
 * @throws RangeError for a zone Intl does not know, a window that is not one, or a non-finite instant
 */
export function quietHoursRelease(nowMs: number, timeZone: string, w: QuietWindow): number | undefined {
  checkWindow(w);
  if (!Number.isFinite(nowMs)) throw new RangeError(`quiet hours: instant must be finite, got ${nowMs}`);
  const zone = zoneOf(timeZone);
  const s = w.startMin * MINUTE;
  const e = w.endMin * MINUTE;
  let cur = nowMs;
  let off = offsetAt(zone, cur);
  if (!inside(cur + off, s, e)) return undefined;
  // Each turn either answers or moves `cur` to the next offset change, where the wall clock is still
  // inside; there are at most a couple of changes within a day in any zone's rules.
  for (let turn = 0; turn < 8; turn++) {
    const wall = cur + off;
    const end = wallEnd(wall, s, e);
    const naive = end - off;
    const offAtEnd = offsetAt(zone, naive);
    if (offAtEnd === off) return naive; // no change before the end: the common case
    if (offAtEnd > off) {
      // Spring forward before `end`. If `end` exists on the wall after the jump, that is the answer.
      const after = end - offAtEnd;
      if (after > cur && offsetAt(zone, after) === offAtEnd) return after;
      // `end` is in the skipped hour: the window ends at the jump, unless the jump lands in a window.
      const jump = offsetChange(zone, cur, naive, off);
      if (!inside(jump + offAtEnd, s, e)) return jump;
      cur = jump;
      off = offAtEnd;
      continue;
    }
    // Fall back before `end`. If every wall time the clock can return to is still in this window's
    // span, the clock reaches `end` after the repeat: no need to find the instant of the change.
    if (wall - (off - offAtEnd) >= wallStart(wall, s)) return end - offAtEnd;
    const jump = offsetChange(zone, cur, naive, off);
    if (!inside(jump + offAtEnd, s, e)) return jump; // the clock went back before `start`
    cur = jump;
    off = offAtEnd;
  }
  throw new RangeError(`quiet hours: no release found in ${timeZone} from ${nowMs}`);
}

/**
 * Local wall-clock time of `ms` in `timeZone`, as minutes since local midnight (fractional: seconds
 * and milliseconds count). @throws RangeError for a zone Intl does not know
 */
export function localMinutes(ms: number, timeZone: string): number {
  const wall = ms + offsetAt(zoneOf(timeZone), ms);
  return mod(wall, DAY) / MINUTE;
}

function checkWindow(w: QuietWindow): void {
  const ok = (m: number) => Number.isInteger(m) && m >= 0 && m < 1440;
  if (!ok(w.startMin) || !ok(w.endMin) || w.startMin === w.endMin) {
    throw new RangeError(`quiet hours: not a window: start ${w.startMin}, end ${w.endMin} (minutes 0–1439, start ≠ end)`);
  }
}

function mod(a: number, n: number): number {
  const r = a % n;
  return r < 0 ? r + n : r;
}

/** Wall times are epoch-like ms: the UTC instant whose UTC fields equal the local fields. */
function inside(wall: number, s: number, e: number): boolean {
  const t = mod(wall, DAY);
  return s < e ? t >= s && t < e : t >= s || t < e;
}

/** The first `end` on the wall after `wall`, which is inside. */
function wallEnd(wall: number, s: number, e: number): number {
  const t = mod(wall, DAY);
  const day = wall - t;
  return t < e ? day + e : day + DAY + e;
}

/** The `start` of the window span that holds `wall`, which is inside. */
function wallStart(wall: number, s: number): number {
  const t = mod(wall, DAY);
  const day = wall - t;
  return t >= s ? day + s : day - DAY + s;
}

/**
 * The first instant in (lo, hi] whose offset is not `off`, given offsetAt(lo) = off ≠ offsetAt(hi).
 * Zone rules change offsets on whole seconds, so a bisection over seconds finds it exactly; this runs
 * only on a day the clock changes inside the window.
 */
function offsetChange(zone: Intl.DateTimeFormat, lo: number, hi: number, off: number): number {
  let a = Math.floor(lo / 1000); // offset `off`
  let b = Math.ceil(hi / 1000); // offset not `off`
  while (b - a > 1) {
    const m = Math.floor((a + b) / 2);
    if (offsetAt(zone, m * 1000) === off) a = m;
    else b = m;
  }
  return b * 1000;
}

// One formatter per zone: constructing one costs far more than formatting. Keyed by the name as
// given; names reach here canonical from the profile layer, the bound only guards against misuse.
const zones = new Map<string, Intl.DateTimeFormat>();
const MAX_ZONES = 2000;

function zoneOf(timeZone: string): Intl.DateTimeFormat {
  let f = zones.get(timeZone);
  if (f === undefined) {
    // hourCycle h23, not hour12: false, which gives h24 in en-US and prints midnight as 24:00.
    f = new Intl.DateTimeFormat('en-US-u-ca-gregory-nu-latn', {
      timeZone, // RangeError when Intl does not know it
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      hourCycle: 'h23',
    });
    if (zones.size >= MAX_ZONES) zones.clear();
    zones.set(timeZone, f);
  }
  return f;
}

/**
 * The zone's offset from UTC at `ms`, in ms (local wall = ms + offset). Parses `format()` ("3/29/2026,
 * 01:59:00"), about three times faster than formatToParts; the six numbers come in a fixed order.
 */
function offsetAt(zone: Intl.DateTimeFormat, ms: number): number {
  const str = zone.format(ms);
  const n = [0, 0, 0, 0, 0, 0];
  let k = -1;
  let inNum = false;
  for (let i = 0; i < str.length; i++) {
    const c = str.charCodeAt(i) - 48;
    if (c >= 0 && c <= 9) {
      if (!inNum) {
        k++;
        inNum = true;
        if (k > 5) break;
      }
      n[k] = n[k]! * 10 + c;
    } else {
      inNum = false;
    }
  }
  if (k !== 5) throw new RangeError(`quiet hours: unexpected local time "${str}" for ${ms}`);
  const [month, day, year, hour, minute, second] = n as [number, number, number, number, number, number];
  const secondStart = ms - mod(ms, 1000);
  const wall = Date.UTC(year, month - 1, day, hour, minute, second);
  return wall - secondStart;
}
