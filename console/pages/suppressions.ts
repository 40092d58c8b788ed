/**
 * The e-mail suppression list (the notifier's): search by part of an address and by reason, page
 * through it oldest first, add an address by hand, and remove one after a confirmation page
 * (removing it means e-mail to that address is sent again).
 */
import { html, href, type Html } from '../html.js';
import { details, field, select, table } from '../forms.js';
import type { ApiProblem } from '../api/problem.js';
import {
  addSuppression,
  getSuppression,
  listSuppressions,
  removeSuppression,
  type Suppression,
  type SuppressionReason,
} from '../api/notifier-suppressions.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { formCall, timeEl } from './ops-format.js';

const REASONS: readonly SuppressionReason[] = ['bounce', 'complaint', 'manual'];

const REASON_TEXT: Record<SuppressionReason, string> = {
  bounce: 'permanent bounce',
  complaint: 'complaint',
  manual: 'added by an operator',
};

function removeHref(address: string): string {
  return href(`/suppressions/${encodeURIComponent(address)}/remove`);
}

async function listPage(ctx: PageContext, add?: { address: string; detail: string; problem: ApiProblem }): Promise<PageResult> {
  const q = (ctx.request.query.get('q') ?? '').trim();
  const rawReason = ctx.request.query.get('reason') ?? '';
  const reason = (REASONS as readonly string[]).includes(rawReason) ? (rawReason as SuppressionReason) : undefined;
  const cursor = ctx.request.query.get('cursor') ?? undefined;
  const searched = await formCall(() =>
    listSuppressions(ctx.api.notifier, { ...(q ? { q } : {}), ...(reason ? { reason } : {}), ...(cursor ? { cursor } : {}), limit: 50 }),
  );
  const page = searched.ok ? searched.value : { suppressions: [] as Suppression[] };
  const searchProblem = searched.ok ? undefined : searched.problem;
  const next = page.next_cursor;
  const body: Html = html`<section aria-labelledby="search-h">
      <h2 id="search-h">Search</h2>
      <form method="get" action="/suppressions" class="inline" role="search">
        ${field({ name: 'q', label: 'Address contains', value: q, type: 'search', hint: 'A domain (@example.com) or part of an address; any case.', problem: searchProblem })}
        ${select({
          name: 'reason',
          label: 'Reason',
          value: reason ?? '',
          options: [{ value: '', label: 'any' }, ...REASONS.map((r) => ({ value: r, label: REASON_TEXT[r] }))],
        })}
        <p><button type="submit">Search</button></p>
      </form>
    </section>
    ${table<Suppression>({
      caption: q || reason ? 'Matching suppressed addresses, oldest first' : 'Suppressed addresses, oldest first',
      id: 'suppressions',
      empty: q || reason ? 'No suppressed address matches.' : 'The suppression list is empty.',
      rows: page.suppressions,
      columns: [
        { header: 'Address', rowHeader: true, cell: (s) => s.address },
        { header: 'Reason', cell: (s) => REASON_TEXT[s.reason] ?? s.reason },
        { header: 'Detail', cell: (s) => s.detail ?? '' },
        { header: 'Provider', cell: (s) => s.provider },
        { header: 'Since', cell: (s) => timeEl(s.created_at) },
        {
          header: 'Action',
          cell: (s) => html`<a href="${removeHref(s.address)}" aria-label="Remove ${s.address}">Remove</a>`,
        },
      ],
    })}
    ${next !== undefined && html`<p><a rel="next" href="${href('/suppressions', { q, reason, cursor: next })}">Next page</a></p>`}
    <section aria-labelledby="add-h">
      <h2 id="add-h">Add an address</h2>
      <p>E-mail to a suppressed address is never sent: its delivery ends <code>suppressed</code>.</p>
      <form method="post" action="/suppressions" class="stack" novalidate>
        ${ctx.csrfField()}
        ${field({ name: 'address', label: 'E-mail address', type: 'email', value: add?.address ?? '', required: true, autocomplete: 'off', problem: add?.problem })}
        ${field({ name: 'detail', label: 'Note', value: add?.detail ?? '', hint: 'Why (kept with the entry).', problem: add?.problem })}
        <p><button type="submit">Add to the suppression list</button></p>
      </form>
    </section>`;
  return ctx.render({
    title: 'Suppression list',
    body,
    ...(add ? { status: 422, problem: add.problem } : searchProblem ? { problem: searchProblem } : {}),
  });
}

function notListed(ctx: PageContext, address: string): PageResult {
  return ctx.render({
    title: 'Not on the suppression list',
    status: 404,
    body: html`<p><code>${address}</code> is not on the suppression list.</p>
      <p><a href="/suppressions">The suppression list</a></p>`,
  });
}

export const suppressionsPage: ConsolePage = {
  id: 'suppressions',
  title: 'Suppression list',
  path: '/suppressions',
  register(router) {
    router.get('/suppressions', (ctx) => listPage(ctx));

    router.post('/suppressions', async (ctx) => {
      const address = (ctx.request.form.get('address') ?? '').trim();
      const detail = (ctx.request.form.get('detail') ?? '').trim();
      const r = await formCall(() => addSuppression(ctx.api.notifier, address, detail || undefined));
      if (!r.ok) return listPage(ctx, { address, detail, problem: r.problem });
      const { created, entry } = r.value;
      return ctx.redirect(
        href('/suppressions', { q: entry.address }),
        created
          ? { kind: 'success', text: `${entry.address} is on the suppression list.` }
          : {
              kind: 'info',
              text: `${entry.address} was already on the suppression list (${REASON_TEXT[entry.reason] ?? entry.reason}); its entry is unchanged.`,
            },
      );
    });

    router.get('/suppressions/:address/remove', async (ctx) => {
      const address = ctx.request.params[0]!;
      const s = await getSuppression(ctx.api.notifier, address);
      if (!s) return notListed(ctx, address);
      return ctx.render({
        title: 'Remove from the suppression list?',
        body: html`${details([
            ['Address', s.address],
            ['Reason', REASON_TEXT[s.reason] ?? s.reason],
            ['Detail', s.detail ?? ''],
            ['Since', timeEl(s.created_at)],
          ])}
          <p>After removal, e-mail to this address is sent again. If it still bounces, it comes back on the list.</p>
          <form method="post" action="${removeHref(s.address)}">
            ${ctx.csrfField()}
            <p><button type="submit" class="danger">Remove ${s.address}</button> <a href="/suppressions">Cancel</a></p>
          </form>`,
      });
    });

    router.post('/suppressions/:address/remove', async (ctx) => {
      const address = ctx.request.params[0]!;
      const r = await formCall(() => removeSuppression(ctx.api.notifier, address));
      if (!r.ok) return ctx.redirect('/suppressions', { kind: 'error', text: r.problem.detail ?? r.problem.title });
      if (!r.value) return ctx.redirect('/suppressions', { kind: 'info', text: `${address} was not on the suppression list.` });
      return ctx.redirect('/suppressions', { kind: 'success', text: `${address} was removed from the suppression list.` });
    });
  },
};
