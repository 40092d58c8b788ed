/**
 * Dead-letter queues, one per channel: the open entries (oldest first) with why each gave up, one
 * entry's details, and re-drive: the entries ticked, one, or the oldest N of a channel. The
 * notifier answers per entry (re-driven, already re-driven, no longer dead-lettered, not found);
 * the page says how many of each.
 */
import { html, href, type Html } from '../html.js';
import { details, field, select, table } from '../forms.js';
import { CHANNELS, getDeadLetter, listDeadLetters, redrive, type DeadLetter, type RedriveResult } from '../api/notifier-ops.js';
import type { ConsolePage, Flash, PageContext, PageResult } from '../page.js';
import { formCall, timeEl } from './ops-format.js';
import { badge } from './notifications.js';
import { safeReturnTo } from '../web.js';
import { directoryFor, person, personLabel, personShort } from '../people.js';

const OUTCOME_TEXT: Record<RedriveResult['result'], string> = {
  redriven: 're-driven',
  already_redriven: 'already re-driven',
  not_dead_lettered: 'no longer dead-lettered',
  not_found: 'not found',
};

/** "2 re-driven, 1 already re-driven." */
export function redriveSummary(results: readonly RedriveResult[]): Flash {
  if (results.length === 0) return { kind: 'info', text: 'Nothing to re-drive.' };
  const counts = new Map<string, number>();
  for (const r of results) counts.set(r.result, (counts.get(r.result) ?? 0) + 1);
  const text = [...counts].map(([k, n]) => `${n} ${OUTCOME_TEXT[k as RedriveResult['result']]}`).join(', ');
  return { kind: counts.has('redriven') ? 'success' : 'info', text: `${text}.` };
}

function channelNav(current: string | undefined, all: boolean): Html {
  const items = [{ value: '', label: 'All channels' }, ...CHANNELS.map((c) => ({ value: c, label: c }))];
  return html`<nav aria-label="Dead-letter queues">
    <ul class="tabs">
      ${items.map(
        (i) =>
          html`<li>
            <a
              href="${href('/dlq', { channel: i.value || undefined, all: all ? 'true' : undefined })}"
              ${(current ?? '') === i.value ? html` aria-current="page"` : ''}
              >${i.label}</a
            >
          </li>`,
      )}
    </ul>
  </nav>`;
}

async function listPage(ctx: PageContext): Promise<PageResult> {
  const q = ctx.request.query;
  const rawChannel = q.get('channel') ?? '';
  const channel = (CHANNELS as readonly string[]).includes(rawChannel) ? rawChannel : undefined;
  const reason = (q.get('reason') ?? '').trim();
  const all = q.get('all') === 'true';
  const notification = (q.get('notification') ?? '').trim();
  const cursor = q.get('cursor') ?? undefined;
  const listed = await formCall(() => listDeadLetters(ctx.api.notifier, { channel, reason: reason || undefined, all, cursor, limit: 50 }));
  const entries = (listed.ok ? listed.value.dead_letters : []).filter((e) => notification === '' || e.notification_id === notification);
  const next = listed.ok ? listed.value.next_cursor : null;
  const back = href('/dlq', { channel, reason, all: all ? 'true' : undefined });
  const open = entries.filter((e) => e.redriven_at === undefined);
  const people = await directoryFor(ctx.api.identity, [...entries.map((e) => e.recipient_id), ...entries.map((e) => e.redriven_by)], true);
  const body = html`${channelNav(channel, all)}
    <form method="get" action="/dlq" class="inline" role="search">
      ${channel && html`<input type="hidden" name="channel" value="${channel}" />`}
      ${field({ name: 'reason', label: 'Reason', value: reason, type: 'search', hint: 'e.g. retries_exhausted, secondary_failed', problem: listed.ok ? undefined : listed.problem })}
      ${select({
        name: 'all',
        label: 'Show',
        value: all ? 'true' : '',
        options: [
          { value: '', label: 'open entries' },
          { value: 'true', label: 'open and re-driven' },
        ],
      })}
      <p><button type="submit">Filter</button></p>
    </form>
    <form method="post" action="/dlq/redrive">
      ${ctx.csrfField()}
      <input type="hidden" name="back" value="${back}" />
      ${table<DeadLetter>({
        caption: html`${channel ? `The ${channel} dead-letter queue` : 'Every dead-letter queue'}, oldest first
          <span class="caption-note">(times in UTC; the full id and instant on hover)</span>`,
        id: 'dead-letters',
        className: 'compact',
        empty: channel ? `The ${channel} dead-letter queue is empty.` : 'Every dead-letter queue is empty.',
        rows: entries,
        columns: [
          {
            header:
              open.length > 0
                ? html`<input type="checkbox" id="pick-all" data-select-all="ids" aria-label="Select every open entry on this page" />`
                : 'Select',
            cell: (e) =>
              e.redriven_at === undefined
                ? html`<input type="checkbox" name="ids" value="${e.id}" id="pick-${e.id}" aria-label="Select entry ${e.id}" />`
                : '',
          },
          {
            header: 'Entry',
            rowHeader: true,
            nowrap: true,
            cell: (e) => html`<a href="${href(`/dlq/${encodeURIComponent(e.id)}`)}" title="${e.id}"><code>${e.id.slice(0, 8)}</code></a>`,
          },
          { header: 'Channel', nowrap: true, cell: (e) => e.channel },
          {
            header: 'Reason',
            cell: (e) => html`<strong>${e.reason}</strong>${e.detail && html`<br /><span class="detail">${e.detail}</span>`}`,
          },
          { header: 'Tries', numeric: true, cell: (e) => e.attempts },
          {
            header: 'Recipient',
            nowrap: true,
            cell: (e) =>
              html`<a href="${href('/notifications', { user: e.recipient_id })}">${personShort(e.recipient_id, people, true)}</a>`,
          },
          {
            header: 'Notification',
            nowrap: true,
            cell: (e) =>
              html`<a href="${href('/notifications', { id: e.notification_id })}" title="${e.notification_id}"
                ><code>${e.notification_id.slice(0, 8)}</code></a
              >`,
          },
          { header: 'Now', nowrap: true, cell: (e) => badge(e.delivery_status) },
          { header: 'Dead-lettered', nowrap: true, cell: (e) => timeEl(e.created_at, { compact: true }) },
          {
            header: 'Re-driven',
            nowrap: true,
            cell: (e) =>
              e.redriven_at !== undefined
                ? html`<span title="by ${personLabel(e.redriven_by, people)}">${timeEl(e.redriven_at, { compact: true })}</span>`
                : '—',
          },
        ],
      })}
      ${open.length > 0 && html`<p><button type="submit">Re-drive selected</button></p>`}
    </form>
    ${next && html`<p><a href="${href('/dlq', { channel, reason, all: all ? 'true' : undefined, cursor: next })}" rel="next">Next page</a></p>`}
    ${
      channel &&
      html`<section aria-labelledby="bulk-h">
        <h2 id="bulk-h">Re-drive the oldest of ${channel}</h2>
        <form method="post" action="/dlq/redrive" class="inline">
          ${ctx.csrfField()}
          <input type="hidden" name="channel" value="${channel}" />
          <input type="hidden" name="back" value="${back}" />
          ${field({ name: 'limit', label: 'How many', type: 'number', min: 1, max: 1000, value: 100 })}
          <p><button type="submit" class="secondary">Re-drive the oldest open entries</button></p>
        </form>
      </section>`
    }`;
  return ctx.render({ title: 'Dead-letter queues', body });
}

async function entryPage(ctx: PageContext): Promise<PageResult> {
  const id = ctx.request.params[0]!;
  const e = /^[0-9a-f-]{36}$/i.test(id) ? await getDeadLetter(ctx.api.notifier, id) : undefined;
  if (!e)
    return ctx.render({
      title: 'Dead letter',
      status: 404,
      body: html`<p>No dead-letter entry has the id ${id}. <a href="/dlq">All queues</a></p>`,
    });
  const people = await directoryFor(ctx.api.identity, [e.recipient_id, e.redriven_by], true);
  const body = html`<p><a href="${href('/dlq', { channel: e.channel })}">The ${e.channel} queue</a></p>
    ${details([
      ['Entry', html`<code>${e.id}</code>`],
      ['Channel', e.channel],
      ['Priority', e.priority],
      ['Reason', e.reason],
      ['Detail', e.detail],
      ['Attempts', e.attempts],
      ['Recipient', html`<a href="${href('/notifications', { user: e.recipient_id })}">${person(e.recipient_id, people, true)}</a>`],
      ['Notification', html`<a href="${href('/notifications', { id: e.notification_id })}"><code>${e.notification_id}</code></a>`],
      ['Delivery', html`<code>${e.delivery_id}</code> ${badge(e.delivery_status)}`],
      ['Template', e.template_id],
      ['Dead-lettered', timeEl(e.created_at)],
      ['Re-driven', e.redriven_at !== undefined ? html`${timeEl(e.redriven_at)} by ${person(e.redriven_by, people)}` : 'not yet'],
    ])}
    ${
      e.redriven_at === undefined &&
      html`<form method="post" action="/dlq/redrive">
        ${ctx.csrfField()}<input type="hidden" name="ids" value="${e.id}" />
        <input type="hidden" name="back" value="${href(`/dlq/${encodeURIComponent(e.id)}`)}" />
        <p><button type="submit">Re-drive this delivery</button></p>
      </form>`
    }`;
  return ctx.render({ title: `Dead letter ${e.id.slice(0, 8)}`, body });
}

/**
 * Only a path under /dlq may be gone back to. It becomes the Location header as it is, and uWS
 * writes a header value's CR/LF unchanged: anything safeReturnTo refuses (control characters) is
 * refused here too.
 */
export function backOf(raw: string | null): string {
  return raw && (raw === '/dlq' || raw.startsWith('/dlq?') || raw.startsWith('/dlq/')) && safeReturnTo(raw) === raw ? raw : '/dlq';
}

async function redrivePost(ctx: PageContext): Promise<PageResult> {
  const f = ctx.request.form;
  const back = backOf(f.get('back'));
  const ids = f.getAll('ids').filter((s) => s !== '');
  const channel = f.get('channel') ?? '';
  if (ids.length === 0 && channel === '') return ctx.redirect(back, { kind: 'error', text: 'Tick at least one entry to re-drive.' });
  const limitRaw = f.get('limit') ?? '100';
  if (ids.length === 0 && !/^\d{1,4}$/.test(limitRaw))
    return ctx.redirect(back, { kind: 'error', text: 'How many: a whole number from 1 to 1000.' });
  const r = await formCall(() => redrive(ctx.api.notifier, ids.length > 0 ? { ids } : { channel, limit: Number(limitRaw) }));
  if (!r.ok)
    return ctx.redirect(back, { kind: 'error', text: `The notifier refused the re-drive: ${r.problem.detail ?? r.problem.title}` });
  return ctx.redirect(back, redriveSummary(r.value));
}

export const dlqPage: ConsolePage = {
  id: 'dlq',
  title: 'Dead letters',
  path: '/dlq',
  register(r) {
    r.get('/dlq', listPage);
    r.post('/dlq/redrive', redrivePost);
    r.get('/dlq/:id', entryPage);
  },
};
