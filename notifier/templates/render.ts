/**
 * Rendering one channel's output from one locale variant: a pure function of (compiled parts,
 * channel, data, digest). Loading and choosing the variant is catalog.ts's job.
 *
 * A digest render (a {@link Digest} is given) fills `{{#items}}` from its items and the top level
 * from `digestData(data, items, count)` (syntax.ts). Every rule below applies to the final text,
 * whatever the section expanded to.
 *
 * Per channel:
 * - `push`: `title` (optional) and `body`, cut to {@link PUSH_TITLE_MAX} and {@link PUSH_BODY_MAX}
 *   code points with an ellipsis (truncate.ts). The body is what a lock screen shows, about 178
 *   characters (README, "Templates"); titles show far less, so they are held to 65.
 * - `email`: `subject` (line breaks in substituted values become spaces: a subject is one header
 *   line), `text`, and `html`, whose substituted values are HTML-escaped. A template without an
 *   HTML part gets one made from the text (escaped, line breaks as `<br>`). `body` is the text.
 * - `sms`: plain `body`, with its encoding and segment count (sms.ts); more than
 *   {@link SMS_MAX_SEGMENTS} segments is a render error.
 * - `in_app`: `title` (optional) and `body`, as written.
 * An empty push or SMS body is a render error: every provider refuses one.
 */
import { RenderError, SMS_MAX_SEGMENTS } from './errors.js';
import { smsSize, type SmsEncoding } from './sms.js';
import { digestData, escapeHtml, parseTemplate, substitute, type Piece, type TemplateData } from './syntax.js';
import { truncateText } from './truncate.js';

export const CHANNELS = ['push', 'email', 'sms', 'in_app'] as const;
export type Channel = (typeof CHANNELS)[number];

export const PUSH_BODY_MAX = 178;
export const PUSH_TITLE_MAX = 65;

/** The source text of each channel's part, as stored and as given to the admin API. */
export interface ChannelParts {
  push?: { title?: string; body: string };
  email?: { subject: string; text: string; html?: string };
  sms?: { body: string };
  in_app?: { title?: string; body: string };
}

/** The fields each channel's part takes, and which are required. */
export const PART_FIELDS: Readonly<Record<Channel, Readonly<Record<string, 'required' | 'optional'>>>> = {
  push: { title: 'optional', body: 'required' },
  email: { subject: 'required', text: 'required', html: 'optional' },
  sms: { body: 'required' },
  in_app: { title: 'optional', body: 'required' },
};

/** A variant's parts, parsed. */
export type CompiledParts = Partial<Record<Channel, Readonly<Record<string, readonly Piece[]>>>>;

/** What a channel sends: the output of {@link renderParts}, and (with template and locale) of renderTemplate. */
export interface RenderedContent {
  channel: Channel;
  title?: string;
  /** push and in_app: the body; sms: the text; email: the plain-text part. */
  body: string;
  subject?: string;
  text?: string;
  html?: string;
  /** sms: the number of segments the text is billed as. */
  segments?: number;
  /** sms: how the text is encoded, which decides the segment size. */
  encoding?: SmsEncoding;
}

/** What a digest render adds to `data`: the held notifications' `template_data`, oldest first. */
export interface Digest {
  items: readonly TemplateData[];
  /** How many notifications the digest stands for (at least `items.length`, its default). */
  count?: number | undefined;
}

/** Parses every field of every part. @throws TemplateSyntaxError (via parseTemplate) */
export function compileParts(parts: ChannelParts): CompiledParts {
  const out: CompiledParts = {};
  for (const channel of CHANNELS) {
    const part = parts[channel] as Record<string, string | undefined> | undefined;
    if (!part) continue;
    const compiled: Record<string, readonly Piece[]> = {};
    for (const field of Object.keys(PART_FIELDS[channel])) {
      const src = part[field];
      if (typeof src === 'string') compiled[field] = parseTemplate(src);
    }
    out[channel] = compiled;
  }
  return out;
}

function oneLine(s: string): string {
  return s.replace(/\r\n|[\r\n\u0085\u2028\u2029]/g, ' ');
}

function htmlFromText(text: string): string {
  return escapeHtml(text).replace(/\r\n|\n|\r/g, '<br>\n');
}

/**
 * Renders `channel` from a variant's compiled parts; with `digest`, as a digest.
 * @throws RenderError `channel_missing` | `missing_variable` | `invalid_variable` | `empty_output` | `sms_too_long`
 * @throws RangeError when `digest.count` is less than its items (see digestData)
 */
export function renderParts(parts: CompiledParts, channel: Channel, data: TemplateData, digest?: Digest): RenderedContent {
  const part = parts[channel];
  if (!part) throw new RenderError('channel_missing', `the template has no ${channel} part`, { channel });
  const top = digest ? digestData(data, digest.items, digest.count) : data;
  const items = digest?.items;
  const fill = (field: string, escape?: (v: string) => string): string | undefined => {
    const pieces = part[field];
    return pieces === undefined ? undefined : substitute(pieces, top, { escape, items });
  };
  switch (channel) {
    case 'push': {
      const body = fill('body') ?? '';
      if (body.trim() === '') throw new RenderError('empty_output', 'the push body renders empty', { channel });
      const title = fill('title');
      const out: RenderedContent = { channel, body: truncateText(body, PUSH_BODY_MAX) };
      if (title !== undefined && title !== '') out.title = truncateText(title, PUSH_TITLE_MAX);
      return out;
    }
    case 'email': {
      const text = fill('text') ?? '';
      const html = fill('html', escapeHtml) ?? htmlFromText(text);
      return { channel, subject: oneLine(fill('subject') ?? ''), text, html, body: text };
    }
    case 'sms': {
      const body = fill('body') ?? '';
      if (body.trim() === '') throw new RenderError('empty_output', 'the SMS text renders empty', { channel });
      const size = smsSize(body);
      if (size.segments > SMS_MAX_SEGMENTS) {
        throw new RenderError('sms_too_long', `the SMS text needs ${size.segments} segments; at most ${SMS_MAX_SEGMENTS} are sent`, {
          channel,
        });
      }
      return { channel, body, segments: size.segments, encoding: size.encoding };
    }
    case 'in_app': {
      const out: RenderedContent = { channel, body: fill('body') ?? '' };
      const title = fill('title');
      if (title !== undefined) out.title = title;
      return out;
    }
  }
}
