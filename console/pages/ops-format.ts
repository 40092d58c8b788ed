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

/** `<time>` with the machine-readable instant and the UTC text. */
export function timeEl(t: string | number | null | undefined): Html {
  if (t === null || t === undefined || t === '') return html`—`;
  const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t);
  if (Number.isNaN(d.getTime())) return html`${String(t)}`;
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
