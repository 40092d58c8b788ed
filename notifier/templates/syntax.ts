/**
 * The template language: text with `{{name}}` substitutions, nothing else. No expressions, no
 * helpers, no partials, no loops: a template cannot run code or reach anything but the values it
 * is given. `name` is a `template_data` key made of ASCII letters, digits, `_`, `.` and `-`
 * (starting with a letter, digit or `_`), optionally padded with spaces: `{{ order_id }}`.
 *
 * Every `{{` must open a well-formed substitution; anything else (`{{{x}}}`, `{{#each}}`, an
 * unclosed `{{`) is a syntax error, reported when the template is created. A lone `}}` is text.
 * Substituted values are inserted as they are and never parsed again, so a value containing
 * `{{x}}` stays literal text.
 */
import { RenderError, TemplateSyntaxError } from './errors.js';

/** A parsed template: literal text and variable references, in order. */
export type Piece = string | { readonly name: string };

export const VARIABLE_NAME_MAX_LENGTH = 64;
const TAG_RE = /\{\{[ \t]*([A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*\}\}/y;

/** Parses a template source. @throws TemplateSyntaxError naming the offset of the fault. */
export function parseTemplate(src: string): readonly Piece[] {
  const pieces: Piece[] = [];
  let text = '';
  let i = 0;
  while (i < src.length) {
    const open = src.indexOf('{{', i);
    if (open < 0) {
      text += src.slice(i);
      break;
    }
    text += src.slice(i, open);
    TAG_RE.lastIndex = open;
    const m = TAG_RE.exec(src);
    if (!m) {
      const close = src.indexOf('}}', open + 2);
      throw new TemplateSyntaxError(
        close < 0
          ? `unclosed {{ at character ${open}`
          : `{{ at character ${open} must be {{name}} (letters, digits, _ . -); no other syntax is supported`,
        open,
      );
    }
    const name = m[1]!;
    if (name.length > VARIABLE_NAME_MAX_LENGTH) {
      throw new TemplateSyntaxError(`variable name at character ${open} is longer than ${VARIABLE_NAME_MAX_LENGTH}`, open);
    }
    if (text !== '') pieces.push(text);
    text = '';
    pieces.push({ name });
    i = open + m[0].length;
  }
  if (text !== '') pieces.push(text);
  return pieces;
}

/** The distinct variable names a parsed template uses, in order of first use. */
export function variablesOf(pieces: readonly Piece[]): string[] {
  const out: string[] = [];
  for (const p of pieces) if (typeof p !== 'string' && !out.includes(p.name)) out.push(p.name);
  return out;
}

/**
 * A `template_data` object: string keys to string values (`map<string, string>` in
 * proto/notify/v1/notify.proto).
 */
export type TemplateData = Readonly<Record<string, string>>;

/**
 * Fills in a parsed template from `data` (own properties only: `{{constructor}}` is a missing
 * variable, not Object's constructor). `escape` is applied to every substituted value, never to
 * the template's own text (HTML escaping for the HTML part of an email).
 * @throws RenderError `missing_variable` | `invalid_variable`
 */
export function substitute(pieces: readonly Piece[], data: TemplateData, escape?: (value: string) => string): string {
  let out = '';
  for (const p of pieces) {
    if (typeof p === 'string') {
      out += p;
      continue;
    }
    if (!Object.prototype.hasOwnProperty.call(data, p.name)) {
      throw new RenderError('missing_variable', `template_data has no value for {{${p.name}}}`, { variable: p.name });
    }
    const value: unknown = data[p.name];
    if (typeof value !== 'string') {
      throw new RenderError('invalid_variable', `template_data.${p.name} must be a string`, { variable: p.name });
    }
    out += escape ? escape(value) : value;
  }
  return out;
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}
