/**
 * Form controls and tables in the console's one style, accessible by construction: every control
 * has a real `<label>`, a hint and an error are tied to it with `aria-describedby`, a control an
 * API refused is `aria-invalid` with the API's words beside it, and tables have a caption and
 * `<th scope>` headers.
 */
import { html, trusted, type Html, type HtmlValue } from './html.js';
import type { ApiProblem } from './api/problem.js';

/**
 * The message for control `name` in an API's problem: the problem names it in `field` (exactly,
 * or a member of it: `rate` matches `rate`, `variants.en` matches `variants`). The services word
 * `detail` as "field: what is wrong"; the field's name is dropped since it sits beside the control.
 */
export function errorFor(name: string, problem: ApiProblem | undefined, errors?: Readonly<Record<string, string>>): string | undefined {
  if (errors?.[name] !== undefined) return errors[name];
  if (!problem?.field) return undefined;
  const f = problem.field;
  // `rate`, `variants.en` (a member of `variants`), or `quota.rate` (the field inside its message).
  if (f !== name && !f.startsWith(`${name}.`) && !f.startsWith(`${name}[`) && !f.endsWith(`.${name}`)) return undefined;
  const detail = problem.detail ?? problem.title;
  return detail.startsWith(`${f}: `) ? detail.slice(f.length + 2) : detail;
}

export interface FieldOptions {
  name: string;
  label: string;
  value?: string | number;
  type?: 'text' | 'number' | 'email' | 'search' | 'url' | 'password' | 'datetime-local';
  required?: boolean;
  hint?: string;
  /** The problem of the last submission: its message shows here when it names this field. */
  problem?: ApiProblem;
  /** Errors found by the console itself, by control name. */
  errors?: Readonly<Record<string, string>>;
  /** For number inputs. */
  min?: number;
  max?: number;
  step?: string;
  placeholder?: string;
  autocomplete?: string;
  /** Defaults to `f-<name>`. */
  id?: string;
}

function describedBy(id: string, hint: boolean, error: boolean): string | undefined {
  const ids = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter((s) => s !== '');
  return ids.length > 0 ? ids.join(' ') : undefined;
}

function messages(id: string, hint: string | undefined, error: string | undefined): Html {
  return html`${hint !== undefined && html`<p class="hint" id="${id}-hint">${hint}</p>`}${
    error !== undefined && html`<p class="field-error" id="${id}-error">${error}</p>`
  }`;
}

/** Optional attribute: ` name="value"` or nothing. */
function attr(name: string, value: string | number | undefined | false): Html {
  if (value === undefined || value === false) return html``;
  // `name` is always a constant from this file.
  return html` ${trusted(name)}="${value}"`;
}

/** A labelled input with its hint and error. */
export function field(o: FieldOptions): Html {
  const id = o.id ?? `f-${o.name}`;
  const error = errorFor(o.name, o.problem, o.errors);
  return html`<div class="field${error !== undefined ? ' invalid' : ''}">
    <label for="${id}">${o.label}${o.required ? html` <span class="req" aria-hidden="true">*</span>` : ''}</label>
    <input
      id="${id}"
      name="${o.name}"
      type="${o.type ?? 'text'}"
      ${attr('value', o.value ?? '')}${attr('required', o.required ? 'required' : false)}${attr(
        'min',
        o.min,
      )}${attr('max', o.max)}${attr('step', o.step)}${attr('placeholder', o.placeholder)}${attr('autocomplete', o.autocomplete)}${attr(
        'aria-describedby',
        describedBy(id, o.hint !== undefined, error !== undefined),
      )}${attr('aria-invalid', error !== undefined ? 'true' : false)}
    />
    ${messages(id, o.hint, error)}
  </div>`;
}

export interface SelectOptions {
  name: string;
  label: string;
  options: readonly { value: string; label: string }[];
  value?: string;
  hint?: string;
  problem?: ApiProblem;
  errors?: Readonly<Record<string, string>>;
  required?: boolean;
  id?: string;
}

export function select(o: SelectOptions): Html {
  const id = o.id ?? `f-${o.name}`;
  const error = errorFor(o.name, o.problem, o.errors);
  return html`<div class="field${error !== undefined ? ' invalid' : ''}">
    <label for="${id}">${o.label}</label>
    <select
      id="${id}"
      name="${o.name}"
      ${attr('required', o.required ? 'required' : false)}${attr(
        'aria-describedby',
        describedBy(id, o.hint !== undefined, error !== undefined),
      )}${attr('aria-invalid', error !== undefined ? 'true' : false)}
    >
      ${o.options.map((opt) => html`<option value="${opt.value}" ${attr('selected', opt.value === o.value ? 'selected' : false)}>${opt.label}</option>`)}
    </select>
    ${messages(id, o.hint, error)}
  </div>`;
}

export interface TextareaOptions {
  name: string;
  label: string;
  value?: string;
  rows?: number;
  hint?: string;
  problem?: ApiProblem;
  errors?: Readonly<Record<string, string>>;
  required?: boolean;
  id?: string;
}

export function textarea(o: TextareaOptions): Html {
  const id = o.id ?? `f-${o.name}`;
  const error = errorFor(o.name, o.problem, o.errors);
  return html`<div class="field${error !== undefined ? ' invalid' : ''}">
    <label for="${id}">${o.label}</label>
    <textarea
      id="${id}"
      name="${o.name}"
      rows="${o.rows ?? 6}"
      ${attr('required', o.required ? 'required' : false)}${attr(
        'aria-describedby',
        describedBy(id, o.hint !== undefined, error !== undefined),
      )}${attr('aria-invalid', error !== undefined ? 'true' : false)}
    >
${o.value ?? ''}</textarea>
    ${messages(id, o.hint, error)}
  </div>`;
}

/** A checkbox with its label after it. */
export function checkbox(o: { name: string; label: string; checked?: boolean; value?: string; id?: string }): Html {
  const id = o.id ?? `f-${o.name}`;
  return html`<div class="field check">
    <input type="checkbox" id="${id}" name="${o.name}" value="${o.value ?? 'on'}" ${attr('checked', o.checked ? 'checked' : false)} />
    <label for="${id}">${o.label}</label>
  </div>`;
}

export interface Column<R> {
  /** Text, or markup (a "select all" checkbox). */
  header: string | Html;
  cell: (row: R) => HtmlValue;
  /** This column's cell is the row's header (`<th scope="row">`). */
  rowHeader?: boolean;
  /** Right-aligned numbers. */
  numeric?: boolean;
  /** Kept on one line (ids, dates): the table scrolls sideways rather than wrap them. */
  nowrap?: boolean;
}

function cellClass<R>(c: Column<R>): string | false {
  const classes = [c.numeric ? 'num' : '', c.nowrap ? 'nowrap' : ''].filter((x) => x !== '');
  return classes.length > 0 ? classes.join(' ') : false;
}

/** A data table with a caption, column headers and, optionally, a row header column. */
export function table<R>(o: {
  caption: string | Html;
  columns: readonly Column<R>[];
  rows: readonly R[];
  empty?: string;
  id?: string;
  /** Extra class on the table (`compact`). */
  className?: string;
}): Html {
  if (o.rows.length === 0) return html`<p class="empty">${o.empty ?? 'Nothing to show.'}</p>`;
  return html`<div class="table-wrap"><table${attr('id', o.id)}${attr('class', o.className ?? false)}>
<caption>${o.caption}</caption>
<thead><tr>${o.columns.map((c) => html`<th scope="col" ${attr('class', cellClass(c))}>${c.header}</th>`)}</tr></thead>
<tbody>
${o.rows.map(
  (r) =>
    html`<tr>
      ${o.columns.map((c) =>
        c.rowHeader
          ? html`<th scope="row" ${attr('class', cellClass(c))}>${c.cell(r)}</th>`
          : html`<td${attr('class', cellClass(c))}>${c.cell(r)}</td>`,
      )}
    </tr> `,
)}</tbody>
</table></div>`;
}

/** A definition list of label → value pairs (a record's details). */
export function details(pairs: readonly (readonly [string, HtmlValue])[]): Html {
  return html`<dl class="details">
    ${pairs.map(
      ([k, v]) =>
        html`<dt>${k}</dt>
          <dd>${v === undefined || v === null || v === '' ? '—' : v}</dd>`,
    )}
  </dl>`;
}
