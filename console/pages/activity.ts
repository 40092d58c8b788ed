/**
 * Recent activity: the latest notifications across every user (what operators of a notification
 * system open first), each with its state per channel, filterable by notification type, channel
 * and delivery state (`GET /api/v1/admin/notifications` without `user_id`). A row links to the
 * notification's page, where each channel says why; the recipient is shown by name where identity
 * knows them. The first page reloads itself every 15 s (assets/console.js), older pages do not.
 */
import { html, href, type Html } from '../html.js';
import { select, table } from '../forms.js';
import { ACTIVITY_STATUSES, CHANNELS, notificationTypes, recentNotifications, type AdminNotification } from '../api/notifier-ops.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { directoryFor, personShort, type Directory } from '../people.js';
import { badge } from './notifications.js';
import { formCall, timeEl } from './ops-format.js';

const PAGE_SIZE = 50;

function channelStates(n: AdminNotification): Html {
  const channels = Object.keys(n.status_view.channels).sort();
  if (channels.length === 0) return html`<span class="hint">no delivery yet</span>`;
  return html`<ul class="channel-states">
    ${channels.map((c) => html`<li data-channel="${c}">${c}: ${badge(n.status_view.channels[c]!)}</li>`)}
  </ul>`;
}

function activityTable(list: readonly AdminNotification[], people: Directory, filtered: boolean): Html {
  return table<AdminNotification>({
    caption: html`Latest notifications, newest first <span class="caption-note">(times in UTC)</span>`,
    id: 'activity',
    className: 'compact',
    empty: filtered ? 'No notification matches these filters.' : 'No notification has been sent yet.',
    rows: list,
    columns: [
      {
        header: 'When',
        rowHeader: true,
        nowrap: true,
        cell: (n) => html`<a href="${href('/notifications', { id: n.id })}">${timeEl(n.created_at, { compact: true })}</a>`,
      },
      {
        header: 'Event',
        cell: (n) => html`${n.event_type}${n.notification_type && html`<br /><span class="hint">${n.notification_type}</span>`}`,
      },
      { header: 'Tier', nowrap: true, cell: (n) => n.priority },
      {
        header: 'Recipient',
        nowrap: true,
        cell: (n) =>
          n.recipient_id
            ? html`<a href="${href('/notifications', { user: n.recipient_id })}">${personShort(n.recipient_id, people, true)}</a>`
            : n.campaign_id
              ? html`campaign <a href="${href(`/campaigns/${encodeURIComponent(n.campaign_id)}`)}">${n.campaign_id}</a>`
              : `segment ${n.segment_id ?? '?'}`,
      },
      { header: 'Per channel', cell: (n) => channelStates(n) },
      { header: 'Overall', nowrap: true, cell: (n) => badge(n.status_view.status) },
    ],
  });
}

async function renderActivity(ctx: PageContext): Promise<PageResult> {
  const q = ctx.request.query;
  const types = await notificationTypes(ctx.api.notifier).catch(() => []);
  const typeNames = types.map((t) => t.name).sort();
  const pick = (name: string, allowed: readonly string[]): string | undefined => {
    const v = (q.get(name) ?? '').trim();
    return allowed.includes(v) ? v : undefined;
  };
  const type = pick('type', typeNames);
  const channel = pick('channel', CHANNELS);
  const state = pick('state', ACTIVITY_STATUSES);
  const cursor = q.get('cursor') || undefined;
  const r = await formCall(() =>
    recentNotifications(ctx.api.notifier, { notificationType: type, channel, status: state, cursor, limit: PAGE_SIZE }),
  );
  const list = r.ok ? r.value.notifications : [];
  const people = await directoryFor(
    ctx.api.identity,
    list.map((n) => n.recipient_id),
    true,
  );
  const filters = { type, channel, state };
  const any = (o: readonly string[], label: string) => [{ value: '', label }, ...o.map((v) => ({ value: v, label: v.replace(/_/g, ' ') }))];
  const body = html`<form method="get" action="/activity" class="inline" role="search">
      ${select({ name: 'type', label: 'Notification type', value: type ?? '', options: any(typeNames, 'any type') })}
      ${select({ name: 'channel', label: 'Channel', value: channel ?? '', options: any(CHANNELS, 'any channel') })}
      ${select({ name: 'state', label: 'State', value: state ?? '', options: any(ACTIVITY_STATUSES, 'any state'), hint: 'of a delivery (on the channel chosen)' })}
      <p><button type="submit">Filter</button> ${(type || channel || state) && html`<a href="/activity">Clear</a>`}</p>
    </form>
    <div id="activity-feed" ${cursor === undefined ? html` data-refresh="15"` : ''}>
      ${r.ok ? activityTable(list, people, type !== undefined || channel !== undefined || state !== undefined) : ''}
      ${r.ok && r.value.next_cursor && html`<p><a rel="next" href="${href('/activity', { ...filters, cursor: r.value.next_cursor })}">Older</a></p>`}
      ${cursor !== undefined && html`<p><a href="${href('/activity', filters)}">Back to the newest</a></p>`}
    </div>`;
  return ctx.render({ title: 'Recent activity', body, ...(r.ok ? {} : { problem: r.problem, status: 422 }) });
}

export const activityPage: ConsolePage = {
  id: 'activity',
  title: 'Recent activity',
  path: '/activity',
  register(r) {
    r.get('/activity', renderActivity);
  },
};
