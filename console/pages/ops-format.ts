/**
 * Small display helpers shared by the operations pages (clients, segments, campaigns,
 * suppressions, providers): times in UTC, counts with separators, and the catch that turns an
 * API's refusal of a form into the form shown again.
 */
import { html, type Html } from '../html.js';
import { isApiError, type ApiProblem } from '../api/problem.js';

/** An instant in UTC to the second (`2026-11-24 07:04:04 UTC`), from ISO text or epoch seconds; `—` for none. */
export function when(t: string | number | null | undefined): string {
  if (t === null || t === undefined || t === '') return '—';
  const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A count with thousands separators. */
export function count(n: number | null | undefined): string {
  return n === null || n === undefined ? '—' : n.toLocaleString('en-US');
}

/**
 * `<time>` with the machine-readable instant and the UTC text. `compact` (tables that must fit
 * 1,280 px): `2026-11-24 07:04`, the instant to the second on hover; the table's caption says UTC.
 */
export function timeEl(t: string | number | null | undefined, o: { compact?: boolean } = {}): Html {
  if (t === null || t === undefined || t === '') return html`—`;
  const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t);
  if (Number.isNaN(d.getTime())) return html`${String(t)}`;
  if (o.compact)
    return html`<time datetime="${d.toISOString()}" title="${when(t)}">${d.toISOString().slice(0, 16).replace('T', ' ')}</time>`;
  return html`<time datetime="${d.toISOString()}">${when(t)}</time>`;
}

/**
 * Runs an API call made for a form: a refusal the operator can act on (4xx: a field, a conflict,
 * not found) comes back as the problem to show beside the form; anything else (5xx, unreachable)
 * is thrown on to the router's error page.
 */
export async function formCall<T>(fn: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; problem: ApiProblem }> {
  try {
    return { ok: true, value: await fn() };
  } catch (err) {
    if (isApiError(err) && err.status >= 400 && err.status < 500 && err.status !== 401) return { ok: false, problem: err.problem };
    throw err;
  }
}

/** Labels for the detail fields the services write, where the key alone reads badly. */
const FIELD_LABELS: Readonly<Record<string, string>> = {
  fanouts: 'Fan-outs',
  notification_id: 'Request',
  notification_ids: 'Requests',
};

/** `stop_reason` → "Stop reason". */
export function fieldLabel(key: string): string {
  const known = FIELD_LABELS[key];
  if (known) return known;
  const words = key
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .replace(/[_-]+/g, ' ')
    .trim()
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/**
 * A JSON detail (an audit entry's `detail`) as fields: an object's members as a small definition
 * list (nested objects nest), a list of plain values joined, `null` as "none"; never raw JSON.
 * Members whose value is null are left out when `skipNull` (an unset reason says nothing).
 */
export function detailFields(value: unknown, skipNull = true): Html {
  if (value === null || value === undefined) return html`none`;
  if (typeof value === 'string') return html`${value}`;
  if (typeof value === 'number') return html`${count(value)}`;
  if (typeof value === 'boolean') return html`${value ? 'yes' : 'no'}`;
  if (Array.isArray(value)) {
    if (value.length === 0) return html`none`;
    if (value.every((v) => v === null || typeof v !== 'object')) return html`${value.map((v) => String(v)).join(', ')}`;
    return html`<ol class="fields-list">
      ${value.map((v) => html`<li>${detailFields(v, skipNull)}</li>`)}
    </ol>`;
  }
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => !(skipNull && (v === null || v === undefined)));
  if (entries.length === 0) return html``;
  return html`<dl class="fields">
    ${entries.map(
      ([k, v]) =>
        html`<div>
          <dt>${fieldLabel(k)}</dt>
          <dd>${detailFields(v, skipNull)}</dd>
        </div>`,
    )}
  </dl>`;
}
