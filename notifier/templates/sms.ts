/**
 * How many SMS segments a text takes, by the real rule (3GPP TS 23.038 and TS 23.040):
 *
 * - When every character is in the GSM 03.38 default alphabet or its extension table, the text is
 *   sent as GSM-7: a default-alphabet character takes one septet, an extension character
 *   (`^ { } \ [ ~ ] | €` and form feed) two (an escape plus the character). Up to 160 septets fit
 *   one message; a longer text is split into segments of 153 septets (7 octets of each go to the
 *   concatenation header), and an escape pair is never split across two segments, so a segment
 *   may carry 152.
 * - Otherwise the whole text is sent as UCS-2 (UTF-16): up to 70 code units fit one message, a
 *   longer text goes in segments of 67, and a surrogate pair (an emoji, say) is never split, so a
 *   segment may carry 66.
 *
 * One character outside GSM-7 (a curly quote, an emoji) switches the whole message to UCS-2. We
 * send the text as given: no "smart encoding" that swaps such characters for GSM look-alikes.
 */

/** GSM 03.38 default alphabet (0x1B, the escape, is not a character of its own). */
const GSM7_BASIC = new Set(
  Array.from(
    '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?' +
      '¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà',
  ),
);
/** GSM 03.38 extension table: each takes two septets. */
const GSM7_EXTENSION = new Set(Array.from('\f^{}\\[~]|€'));

export const GSM7_SINGLE = 160;
export const GSM7_SEGMENT = 153;
export const UCS2_SINGLE = 70;
export const UCS2_SEGMENT = 67;

export type SmsEncoding = 'gsm7' | 'ucs2';

export interface SmsSize {
  encoding: SmsEncoding;
  /** Septets (GSM-7) or UTF-16 code units (UCS-2) of the whole text. */
  units: number;
  /** Messages billed: 1 when it fits a single message, else the number of concatenated segments. */
  segments: number;
}

/** True when every character of `text` can be sent as GSM-7. */
export function isGsm7(text: string): boolean {
  for (const ch of text) if (!GSM7_BASIC.has(ch) && !GSM7_EXTENSION.has(ch)) return false;
  return true;
}

/**
 * Packs characters of the given widths into segments of `size` units, never splitting one.
 * Widths are 1 or 2, so greedy packing is exact.
 */
function pack(widths: readonly number[], size: number): number {
  let segments = 1;
  let used = 0;
  for (const w of widths) {
    if (used + w > size) {
      segments++;
      used = 0;
    }
    used += w;
  }
  return segments;
}

/** The encoding, size and segment count of an SMS text. An empty text is one (empty) message. */
export function smsSize(text: string): SmsSize {
  const gsm = isGsm7(text);
  const widths: number[] = [];
  for (const ch of text) widths.push(gsm ? (GSM7_EXTENSION.has(ch) ? 2 : 1) : ch.length);
  const units = widths.reduce((a, b) => a + b, 0);
  const [single, segment] = gsm ? [GSM7_SINGLE, GSM7_SEGMENT] : [UCS2_SINGLE, UCS2_SEGMENT];
  return { encoding: gsm ? 'gsm7' : 'ucs2', units, segments: units <= single ? 1 : pack(widths, segment) };
}
