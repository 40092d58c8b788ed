/**
 * Notifications: look one up by id, or a user's (newest first), and see per channel what became
 * of it and why: the status, and the reason for a suppression (opted out, capped, on the
 * suppression list), a hold (quiet hours, digest: until when) or a failure (the last provider
 * error). Dead-lettered channels link to the dead-letter queue.
 */
import { html, href, type Html } from '../html.js';
import { details, field, table } from '../forms.js';
import { getNotification, notificationsOf, type AdminNotification, type ChannelDetail } from '../api/notifier-ops.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { formCall, timeEl } from './ops-format.js';
import { directoryFor, person, type Directory } from '../people.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What kind of state a status is, for its badge: progress, waiting, or a stop. */
export function statusClass(status: string): 'ok' | 'wait' | 'bad' | '' {
  if (['delivered', 'opened', 'read', 'sent'].includes(status)) return 'ok';
  if (['queued', 'pending_approval', 'quiet_hours', 'digest'].includes(status)) return 'wait';
  if (
    ['failed', 'dead_lettered', 'undelivered', 'bounced', 'complained', 'suppressed', 'capped', 'opted_out', 'cancelled'].includes(status)
  )
    return 'bad';
  return '';
}

export function badge(status: string): Html {
  return html`<span class="badge ${statusClass(status)}">${status.replace(/_/g, ' ')}</span>`;
}

/** The why of one channel, in words. */
function why(d: ChannelDetail | undefined): Html | string {
  if (!d) return '—';
  const parts: (Html | string)[] = [];
  if (d.reason) parts.push(d.reason);
  if (d.release_at !== undefined) parts.push(html`held until ${timeEl(d.release_at)}`);
  return parts.length > 0 ? html`${parts.map((p, i) => html`${i > 0 ? '; ' : ''}${p}`)}` : '—';
}

function channelTable(n: AdminNotification): Html {
  const channels = Object.keys(n.status_view.channels).sort();
  return table<string>({
    caption: `Per channel (overall: ${n.status_view.status.replace(/_/g, ' ')})`,
    id: `channels-${n.id}`,
    empty: 'No delivery was made for any channel.',
    rows: channels,
    columns: [
      { header: 'Channel', rowHeader: true, cell: (c) => c },
      { header: 'Status', cell: (c) => badge(n.status_view.channels[c]!) },
      { header: 'Why', cell: (c) => why(n.status_view.details[c]) },
      {
        header: 'Next step',
        cell: (c) =>
          n.status_view.channels[c] === 'dead_lettered'
            ? html`<a href="${href('/dlq', { channel: c, notification: n.id })}">In the ${c} dead-letter queue</a>`
            : '',
      },
    ],
  });
}

export function notificationSection(n: AdminNotification, people: Directory): Html {
  return html`<section class="notification" aria-labelledby="n-${n.id}">
    <h2 id="n-${n.id}">${n.event_type} <span class="code">${n.id}</span></h2>
    ${details([
      ['Overall', badge(n.status_view.status)],
      [
        'Recipient',
        n.recipient_id
          ? html`<a href="${href('/notifications', { user: n.recipient_id })}">${person(n.recipient_id, people, true)}</a>`
          : n.segment_id
            ? `segment ${n.segment_id}`
            : '—',
      ],
      ['Notification type', n.notification_type ?? '—'],
      ['Priority', n.priority],
      ['Template', html`<a href="${href(`/templates/${encodeURIComponent(n.template_id)}`)}">${n.template_id}</a>`],
      ['Channels asked for', n.requested_channels.length > 0 ? n.requested_channels.join(', ') : 'the type’s defaults'],
      ['Sent by', person(n.caller, people)],
      ['Campaign', n.campaign_id ?? '—'],
      ['Created', timeEl(n.created_at)],
    ])}
    ${channelTable(n)}
  </section>`;
}

async function lookupPage(ctx: PageContext): Promise<PageResult> {
  const q = ctx.request.query;
  const id = (q.get('id') ?? '').trim();
  const user = (q.get('user') ?? '').trim();
  const cursor = q.get('cursor') ?? undefined;
  let results: Html = html``;
  let status: number | undefined;
  const errors: Record<string, string> = {};
  if (id !== '') {
    if (!UUID_RE.test(id)) {
      errors.id = 'a notification id is a UUID (the notification_id the notifier answered with)';
      status = 422;
    } else {
      const n = await getNotification(ctx.api.notifier, id.toLowerCase());
      results = n
        ? notificationSection(n, await directoryFor(ctx.api.identity, [n.recipient_id, n.caller], true))
        : html`<p class="empty" role="status">No notification has the id ${id}.</p>`;
    }
  } else if (user !== '') {
    const r = await formCall(() => notificationsOf(ctx.api.notifier, user, { cursor, limit: 20 }));
    if (!r.ok) {
      errors.user = r.problem.detail ?? r.problem.title;
      status = 422;
    } else {
      const list = r.value.notifications;
      const people = await directoryFor(ctx.api.identity, [user, ...list.map((n) => n.caller)], true);
      results = html`<h2>Notifications to ${person(user, people, true)}, newest first</h2>
        ${list.length === 0 ? html`<p class="empty" role="status">Nothing was sent to ${user} (a campaign’s sends are under the campaign).</p>` : list.map((n) => notificationSection(n, people))}
        ${r.value.next_cursor && html`<p><a href="${href('/notifications', { user, cursor: r.value.next_cursor })}" rel="next">Older</a></p>`}`;
    }
  }
  const body = html`<form method="get" action="/notifications" class="inline" role="search">
      ${field({ name: 'id', label: 'Notification id', value: id, type: 'search', errors })}
      ${field({ name: 'user', label: 'or a user id', value: id === '' ? user : '', type: 'search', errors })}
      <p><button type="submit">Look up</button></p>
    </form>
    ${results}`;
  return ctx.render({ title: 'Notifications', body, status });
}

export const notificationsPage: ConsolePage = {
  id: 'notifications',
  title: 'Notifications',
  path: '/notifications',
  register(r) {
    r.get('/notifications', lookupPage);
  },
};
