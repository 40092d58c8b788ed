/**
 * Notification types and their policies, read-only: the catalogue the notifier runs with
 * (NOTIFIER_NOTIFICATION_TYPES, changed by configuration and a restart, so there is nothing to
 * edit here) and, per priority tier, what the policy table makes of each type: the channels
 * allowed, whether the user's "off" wins, caps, quiet hours and digests.
 */
import { html, type Html } from '../html.js';
import { details, table } from '../forms.js';
import { notificationTypes, type NotificationTypeView, type TierPolicy } from '../api/notifier-ops.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';

function yesNo(b: boolean): string {
  return b ? 'yes' : 'no';
}

function json(v: unknown): Html | string {
  if (v === null || v === undefined || v === false) return 'none';
  if (v === true) return 'yes';
  if (typeof v === 'object' && Object.keys(v).length === 0) return 'none';
  return html`<code>${JSON.stringify(v)}</code>`;
}

function typeSection(t: NotificationTypeView): Html {
  const caps = Object.entries(t.caps);
  const failover = Object.entries(t.failover);
  return html`<section aria-labelledby="t-${t.name}" data-type="${t.name}">
    <h2 id="t-${t.name}">${t.name}</h2>
    ${details([
      ['Events', t.events.length > 0 ? html`${t.events.map((e, i) => html`${i > 0 ? ', ' : ''}<code>${e}</code>`)}` : 'none'],
      ['Default channels', t.channels.join(', ')],
      ['Mandatory', t.mandatory ? 'yes: users cannot turn it off' : 'no'],
      ['SMS', json(t.sms)],
      ['Caps', caps.length > 0 ? caps.map(([c, r]) => `${c}: ${r.limit} per ${r.window}`).join('; ') : 'none'],
      ['Digest', t.digest ? `every ${t.digest.window} with ${t.digest.template}, at most ${t.digest.max_items} items` : 'none'],
      [
        'Failover',
        failover.length > 0 ? failover.map(([c, to]) => `${c} → ${to.length > 0 ? to.join(', ') : 'nothing'}`).join('; ') : 'none',
      ],
    ])}
    ${table<[string, TierPolicy]>({
      caption: `The ${t.name} policy per priority tier`,
      rows: Object.entries(t.policies),
      columns: [
        { header: 'Tier', rowHeader: true, cell: (r) => r[0] },
        { header: 'Channels allowed', cell: (r) => r[1].allowed_channels.join(', ') || 'none' },
        { header: 'User’s “off” wins', cell: (r) => yesNo(r[1].opt_out) },
        { header: 'Caps', cell: (r) => json(r[1].caps) },
        { header: 'Quiet hours', cell: (r) => yesNo(r[1].quiet_hours) },
        { header: 'Digest', cell: (r) => json(r[1].digest) },
      ],
    })}
  </section>`;
}

async function typesPage(ctx: PageContext): Promise<PageResult> {
  const types = await notificationTypes(ctx.api.notifier);
  const body = html`<p>
      The notification types the notifier runs with (<code>NOTIFIER_NOTIFICATION_TYPES</code>; a change is a configuration change and a
      restart).
    </p>
    <nav aria-label="Types">
      <ul class="tabs">
        ${types.map((t) => html`<li><a href="#t-${t.name}">${t.name}</a></li>`)}
      </ul>
    </nav>
    ${types.map(typeSection)}`;
  return ctx.render({ title: 'Notification types', body });
}

export const notificationTypesPage: ConsolePage = {
  id: 'types',
  title: 'Notification types',
  path: '/types',
  register(r) {
    r.get('/types', typesPage);
  },
};
