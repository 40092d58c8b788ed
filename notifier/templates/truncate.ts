/**
 * Cutting text to a number of characters for a push notification, safely: the count is in Unicode
 * code points (never UTF-16 units, so an emoji's surrogate pair is never split), the cut falls on
 * a grapheme-cluster boundary where one fits (so a flag, a ZWJ family emoji or a letter with its
 * combining accents stays whole), trailing white space is dropped, and an ellipsis `…` (one code
 * point, counted in the limit) marks the cut.
 */

export const ELLIPSIS = '\u2026';

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** The number of Unicode code points in `s`. */
export function codePointLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++, n++) {
    const c = s.charCodeAt(i);
    // A high surrogate followed by a low one is one code point; a lone surrogate counts as one.
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
  }
  return n;
}

/** `s` when it has at most `max` code points, else its longest whole-grapheme prefix plus `…`, at most `max` code points in all. */
export function truncateText(s: string, max: number): string {
  if (max < 1) return '';
  if (codePointLength(s) <= max) return s;
  const budget = max - 1; // the ellipsis takes one
  let out = '';
  let used = 0;
  for (const { segment } of segmenter.segment(s)) {
    const n = codePointLength(segment);
    if (used + n > budget) break;
    out += segment;
    used += n;
  }
  if (out === '') {
    // One grapheme longer than the whole budget (a long run of combining marks): cut by code point.
    out = Array.from(s).slice(0, budget).join('');
  }
  return out.replace(/\s+$/u, '') + ELLIPSIS;
}
