/** The `{segment_id}` of `/api/v1/admin/segments/{segment_id}`: 1–128 visible ASCII characters, no `/`. */
import { invalidField } from '../../shared/errors.js';

export const SEGMENT_ID_MAX_LENGTH = 128;
const SEGMENT_ID_RE = /^[\x21-\x2e\x30-\x7e]+$/;

/** True when `s` can name a segment. */
export function isSegmentId(s: string): boolean {
  return s.length > 0 && s.length <= SEGMENT_ID_MAX_LENGTH && SEGMENT_ID_RE.test(s);
}

/** The segment id from a (URL-decoded) path parameter. @throws PlatformError invalid_field `segment_id` */
export function parseSegmentId(raw: string): string {
  if (!isSegmentId(raw)) throw invalidField('segment_id', `must be 1 to ${SEGMENT_ID_MAX_LENGTH} visible ASCII characters other than /`);
  return raw;
}
