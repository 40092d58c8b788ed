/**
 * The one way the console writes HTML: the `html` tagged template. Every interpolated value is
 * escaped (`& < > " '`, so the same text is safe in element content and in a quoted attribute
 * value) unless it is itself an `Html` fragment made by `html`. Arrays are joined, each item
 * treated the same way; `null`, `undefined` and `false` render as nothing, so
 * `${cond && html`…`}` works.
 *
 * What it does not make safe (and pages must not do): an interpolation in an unquoted attribute
 * value, in an attribute name, in a `<script>` or `<style>` body, or a URL attribute whose value
 * an operator or an API chose (a `javascript:` URL is escaped text but still a URL): pages build
 * hrefs with {@link href}, which only takes paths on this console.
 */

export class Html {
  /** The markup, already safe. */
  readonly value: string;
  constructor(value: string) {
    this.value = value;
  }
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text made safe for element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

export type HtmlValue = Html | string | number | bigint | boolean | null | undefined | readonly HtmlValue[];

function render(v: HtmlValue): string {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof Html) return v.value;
  if (Array.isArray(v)) return (v as readonly HtmlValue[]).map(render).join('');
  return escapeHtml(String(v));
}

/** The tagged template: `html\`<p>${text}</p>\`` escapes `text`; fragments nest as they are. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

/**
 * Markup trusted as it is. Only for constants written in this codebase (never for text that came
 * from a request or an API).
 */
export function trusted(markup: string): Html {
  return new Html(markup);
}

/**
 * A link target on this console: an absolute path (`/quotas`), with query parameters encoded.
 * Anything that is not a path starting with one `/` (a scheme, `//host`) is refused, so an
 * API-supplied value can never become a `javascript:` or off-site link.
 */
export function href(path: string, query?: Record<string, string | number | undefined>): string {
  if (!path.startsWith('/') || path.startsWith('//') || path.startsWith('/\\')) throw new Error(`not a console path: ${path}`);
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s === '' ? path : `${path}?${s}`;
}
