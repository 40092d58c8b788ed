/**
 * The template language: text with `{{name}}` substitutions and one list construct, the digest
 * section `{{#items}}…{{/items}}`. No expressions, no helpers, no partials, no other sections: a
 * template cannot run code or reach anything but the values it is given.
 *
 * - `{{name}}`: a `template_data` key made of ASCII letters, digits, `_`, `.` and `-` (starting
 *   with a letter, digit or `_`), optionally padded with spaces or tabs: `{{ order_id }}`.
 * - `{{#items}}…{{/items}}`: the body is repeated once per digest item, in the order given; inside
 *   it, `{{name}}` reads that item's `template_data` and nothing else. Spaces and tabs are allowed
 *   as in `{{name}}` (`{{# items }}`, `{{ /items }}`). `items` is the only section; sections do
 *   not nest. A section tag alone on its line (only spaces or tabs around it) takes that whole
 *   line with it, line break included, as in Mustache, so a list can be written one item a line.
 * - In a digest render the top level reads the digest's data ({@link digestData}): the request's
 *   `data`, overlaid by the last (most recent) item's, overlaid by `count`, the number of
 *   notifications in the digest (the latest included): "{{actor}} and others: {{count}} likes".
 *
 * Every `{{` must open a well-formed tag; anything else (`{{{x}}}`, `{{#each}}`, an unclosed `{{`,
 * an unclosed or nested section, a `{{/items}}` closing nothing) is a syntax error, reported when
 * the template is created. A lone `}}` is text. Substituted values are inserted as they are and
 * never parsed again, so a value containing `{{x}}` or `{{#items}}` stays literal text.
 */
import { RenderError, TemplateSyntaxError } from './errors.js';

/** A substitution: `{{name}}`. */
export interface Variable {
  readonly name: string;
}

/** `{{#items}}…{{/items}}`: its body, repeated per digest item. */
export interface ItemsSection {
  readonly section: 'items';
  readonly body: readonly (string | Variable)[];
}

/** A parsed template: literal text, variable references and digest sections, in order. */
export type Piece = string | Variable | ItemsSection;

export const VARIABLE_NAME_MAX_LENGTH = 64;
/** The only section name. */
export const ITEMS = 'items';
const TAG_RE = /\{\{[ \t]*([#/]?)[ \t]*([A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*\}\}/y;
const LINE_REST_RE = /[ \t]*(?:\r\n|\n|\r|$)/y;

/** The extent of a section tag standing alone on its line: [start of line, after its line break]. */
function standaloneLine(src: string, open: number, end: number): [number, number] | undefined {
  let start = open;
  while (start > 0 && (src[start - 1] === ' ' || src[start - 1] === '\t')) start--;
  if (start > 0 && src[start - 1] !== '\n' && src[start - 1] !== '\r') return undefined;
  LINE_REST_RE.lastIndex = end;
  const m = LINE_REST_RE.exec(src);
  return m ? [start, end + m[0].length] : undefined;
}

/** Parses a template source. @throws TemplateSyntaxError naming the offset of the fault. */
export function parseTemplate(src: string): readonly Piece[] {
  const top: Piece[] = [];
  // While inside {{#items}}: its body so far and where it opened.
  let section: { body: (string | Variable)[]; open: number } | undefined;
  let text = '';
  const flush = (): void => {
    if (text !== '') (section ? section.body : top).push(text);
    text = '';
  };
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
          : `{{ at character ${open} must be {{name}} (letters, digits, _ . -), {{#items}} or {{/items}}; no other syntax is supported`,
        open,
      );
    }
    const sigil = m[1]!;
    const name = m[2]!;
    let end = open + m[0].length;
    if (sigil === '') {
      if (name.length > VARIABLE_NAME_MAX_LENGTH) {
        throw new TemplateSyntaxError(`variable name at character ${open} is longer than ${VARIABLE_NAME_MAX_LENGTH}`, open);
      }
      flush();
      (section ? section.body : top).push({ name });
      i = end;
      continue;
    }
    if (name !== ITEMS) {
      throw new TemplateSyntaxError(
        `{{${sigil}${name.slice(0, 80)}}} at character ${open}: the only section is {{#items}}…{{/items}}`,
        open,
      );
    }
    if (sigil === '#' && section) {
      throw new TemplateSyntaxError(
        `{{#items}} at character ${open} is inside the {{#items}} opened at character ${section.open}; sections do not nest`,
        open,
      );
    }
    if (sigil === '/' && !section) {
      throw new TemplateSyntaxError(`{{/items}} at character ${open} closes no {{#items}}`, open);
    }
    const line = standaloneLine(src, open, end);
    if (line) {
      // The spaces before the tag are the tail of `text`: nothing but them lies between the line's start and the tag.
      text = text.slice(0, text.length - (open - line[0]));
      end = line[1];
    }
    flush();
    if (sigil === '#') {
      section = { body: [], open };
    } else {
      top.push({ section: ITEMS, body: section!.body });
      section = undefined;
    }
    i = end;
  }
  if (section) throw new TemplateSyntaxError(`{{#items}} at character ${section.open} is never closed with {{/items}}`, section.open);
  flush();
  return top;
}

function isSection(p: Piece): p is ItemsSection {
  return typeof p !== 'string' && 'section' in p;
}

function addName(out: string[], name: string): void {
  if (!out.includes(name)) out.push(name);
}

/**
 * The distinct variable names a parsed template reads from its top-level data, in order of first
 * use. Names inside `{{#items}}` are read from each item instead: see {@link itemVariablesOf}.
 */
export function variablesOf(pieces: readonly Piece[]): string[] {
  const out: string[] = [];
  for (const p of pieces) if (typeof p !== 'string' && !isSection(p)) addName(out, p.name);
  return out;
}

/** The distinct variable names read from each digest item (inside `{{#items}}`), in order of first use. */
export function itemVariablesOf(pieces: readonly Piece[]): string[] {
  const out: string[] = [];
  for (const p of pieces) if (isSection(p)) for (const q of p.body) if (typeof q !== 'string') addName(out, q.name);
  return out;
}

/**
 * A `template_data` object: string keys to string values (`map<string, string>` in
 * proto/notify/v1/notify.proto).
 */
export type TemplateData = Readonly<Record<string, string>>;

/**
 * The top-level data of a digest render: `data` (own properties), overlaid by the last item's,
 * overlaid by `count` (decimal digits). `count` is the number of notifications the digest stands
 * for, which may exceed the items rendered; it defaults to `items.length`.
 * @throws RangeError when `count` is not an integer at least `items.length` (a caller's bug, not a render failure)
 */
export function digestData(data: TemplateData, items: readonly TemplateData[], count: number = items.length): TemplateData {
  if (!Number.isSafeInteger(count) || count < items.length) {
    throw new RangeError(`a digest's count must be an integer of at least its ${items.length} items; got ${String(count)}`);
  }
  return { ...data, ...items[items.length - 1], count: String(count) };
}

/** How {@link substitute} fills a template in, beyond its data. */
export interface SubstituteOptions {
  /** Applied to every substituted value, never to the template's own text (HTML escaping for an email's HTML part). */
  escape?: ((value: string) => string) | undefined;
  /** A digest render's items, for `{{#items}}`. Without them a template that has the section cannot be rendered. */
  items?: readonly TemplateData[] | undefined;
}

function valueOf(data: TemplateData, name: string, where: string): string {
  if (!Object.prototype.hasOwnProperty.call(data, name)) {
    throw new RenderError('missing_variable', `${where} has no value for {{${name}}}`, { variable: name });
  }
  const value: unknown = data[name];
  if (typeof value !== 'string') {
    throw new RenderError('invalid_variable', `${where}.${name} must be a string`, { variable: name });
  }
  return value;
}

/**
 * Fills in a parsed template: top-level `{{name}}` from `data`, and `{{#items}}` once per item
 * with `{{name}}` from that item (own properties only: `{{constructor}}` is a missing variable,
 * not Object's constructor). For a digest render pass {@link digestData} as `data`.
 * @throws RenderError `missing_variable` (`variable: 'items'` when the template has `{{#items}}`
 *   and no items were given) | `invalid_variable`
 */
export function substitute(pieces: readonly Piece[], data: TemplateData, opts: SubstituteOptions = {}): string {
  const { escape, items } = opts;
  let out = '';
  for (const p of pieces) {
    if (typeof p === 'string') {
      out += p;
    } else if (!isSection(p)) {
      const v = valueOf(data, p.name, 'template_data');
      out += escape ? escape(v) : v;
    } else {
      if (items === undefined) {
        throw new RenderError('missing_variable', 'the template repeats {{#items}}, which only a digest render has', { variable: ITEMS });
      }
      for (let k = 0; k < items.length; k++) {
        const item = items[k]!;
        for (const q of p.body) {
          if (typeof q === 'string') {
            out += q;
          } else {
            const v = valueOf(item, q.name, `items[${k}]`);
            out += escape ? escape(v) : v;
          }
        }
      }
    }
  }
  return out;
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}
