/**
 * Campaigns (the notifier's audience requests by `campaign_id`): the list (newest first, or only
 * those waiting for approval), a look-up by id, one campaign's progress (delivery counts per state,
 * per fan-out and in total, from the notifier's counters), approving or rejecting a fan-out held
 * over the approval threshold, and the kill switch.
 *
 * Stopping is final (a stopped campaign never resumes), so it asks for a confirmation checkbox;
 * its answer page lists each notifier replica's acknowledgement, which exists only in the answer to
 * the stop, so that page is the POST's answer rather than a redirect. The progress page works
 * without JavaScript (a Refresh link); with it, console/assets/campaign-refresh.js reloads the
 * counts every few seconds while the campaign is still moving.
 */
import { html, href, type Html } from '../html.js';
import { checkbox, details, field, table } from '../forms.js';
import type { ApiProblem } from '../api/problem.js';
import {
  decideCampaign,
  getCampaign,
  listCampaigns,
  stopCampaign,
  type CampaignCounts,
  type CampaignSummary,
  type CampaignView,
  type Fanout,
} from '../api/notifier-campaigns.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { count, detailFields, formCall, timeEl } from './ops-format.js';
import { directoryFor, person, type Directory } from '../people.js';

const COUNT_COLUMNS: readonly { key: keyof CampaignCounts; label: string; hint: string }[] = [
  { key: 'recipients', label: 'Recipients', hint: 'members when planned' },
  { key: 'expanded', label: 'Expanded', hint: 'members written so far' },
  { key: 'queued', label: 'Queued', hint: 'waiting, held or with a worker' },
  { key: 'sent', label: 'Sent', hint: 'accepted by the provider' },
  { key: 'delivered', label: 'Delivered', hint: 'also opened or read' },
  { key: 'failed', label: 'Failed', hint: 'also dead-lettered' },
  { key: 'suppressed', label: 'Suppressed', hint: 'opted out, capped or on the suppression list' },
  { key: 'cancelled', label: 'Cancelled', hint: 'stopped' },
];

const campaignPath = (id: string): string => href(`/campaigns/${encodeURIComponent(id)}`);

/**
 * Fan-outs still moving: worth refreshing. Not one waiting for approval (nothing moves until an
 * operator decides, and a reload would only get in the way of that decision).
 */
function moving(c: CampaignView): boolean {
  const state = campaignState(c);
  // A stopped campaign still moves while its queued deliveries are being cancelled.
  return state === 'expanding' || state === 'sending' || (state === 'stopped' && c.totals.queued > 0);
}

export type CampaignState = 'stopped' | 'waiting for approval' | 'expanding' | 'sending' | 'finished';

/**
 * What a campaign is doing, from its fan-outs and counts. `finished` only when every fan-out has
 * ended (expanded, rejected or cancelled) and no delivery is still queued: a fan-out still
 * planning or expanding makes it `expanding`, deliveries still queued (written, not yet with a
 * provider) `sending`. Independent of the page being an answer to a refused form (it once showed
 * "finished" there, whatever the fan-outs were doing).
 */
export function campaignState(c: CampaignView): CampaignState {
  if (c.stopped_at !== null) return 'stopped';
  if (c.fanouts.some((f) => f.state === 'pending_approval')) return 'waiting for approval';
  // A fan-out without a state has not been planned yet: it is about to expand.
  if (c.fanouts.some((f) => f.state === 'planning' || f.state === 'expanding' || f.state === undefined)) return 'expanding';
  if (c.totals.queued > 0 || c.fanouts.some((f) => (f.queued ?? 0) > 0)) return 'sending';
  return 'finished';
}

/**
 * The approval section's sentence. The threshold itself is the notifier's setting
 * (NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD), which its API does not report: the sentence names the
 * setting and gives the recipients the held requests would reach, never one as the other.
 */
export function approvalText(pending: readonly Fanout[]): string {
  const n = pending.length;
  const recipients = pending.reduce((sum, f) => sum + (f.recipients ?? 0), 0);
  return (
    `${n} request${n === 1 ? '' : 's'} of this campaign ${n === 1 ? 'is' : 'are'} held: ` +
    `${n === 1 ? 'its segment has' : 'their segments have'} more members than the notifier's approval threshold ` +
    `(NOTIFIER_CAMPAIGN_APPROVAL_THRESHOLD). Approving sends to ${count(recipients)} recipient${recipients === 1 ? '' : 's'}; ` +
    'nothing is sent until an operator decides.'
  );
}

function totalsTable(c: CampaignView): Html {
  return html`<div class="table-wrap">
    <table id="campaign-totals" class="counts">
      <caption>
        Deliveries by state (one per member and channel), over every request of the campaign
      </caption>
      <thead>
        <tr>
          ${COUNT_COLUMNS.map((k) => html`<th scope="col" class="num"><abbr title="${k.hint}">${k.label}</abbr></th>`)}
        </tr>
      </thead>
      <tbody>
        <tr>
          ${COUNT_COLUMNS.map((k) => html`<td class="num" data-count="${k.key}">${count(c.totals[k.key])}</td>`)}
        </tr>
      </tbody>
    </table>
  </div>`;
}

function fanoutTable(c: CampaignView, people: Directory): Html {
  return table<Fanout>({
    caption: 'Audience requests (fan-outs)',
    id: 'campaign-fanouts',
    rows: c.fanouts,
    columns: [
      {
        header: 'Request',
        rowHeader: true,
        nowrap: true,
        // The short id, the whole one on hover and as the link to the request's status.
        cell: (f) =>
          html`<a href="${href('/notifications', { id: f.notification_id })}" title="${f.notification_id}"
            ><code>${f.notification_id.slice(0, 8)}</code></a
          >`,
      },
      {
        header: 'Segment',
        cell: (f) =>
          f.segment
            ? html`<a href="${href(`/segments/${encodeURIComponent(f.segment)}`)}">${f.segment}</a> v${f.segment_version ?? '?'}`
            : '—',
      },
      {
        header: 'State',
        nowrap: true,
        cell: (f) => html`<span data-state="${f.state ?? ''}">${(f.state ?? f.status).replace(/_/g, ' ')}</span>`,
      },
      { header: 'Shards', numeric: true, cell: (f) => `${count(f.shards_done ?? 0)} / ${count(f.shards ?? 0)}` },
      { header: 'Recipients', numeric: true, cell: (f) => count(f.recipients ?? 0) },
      { header: 'Sent', numeric: true, cell: (f) => count(f.sent ?? 0) },
      { header: 'Delivered', numeric: true, cell: (f) => count(f.delivered ?? 0) },
      { header: 'Failed', numeric: true, cell: (f) => count(f.failed ?? 0) },
      {
        header: 'Approval',
        cell: (f) =>
          f.approved === undefined
            ? f.state === 'pending_approval'
              ? 'waiting'
              : '—'
            : html`${f.approved ? 'approved' : 'rejected'} by ${person(f.decided_by, people)}`,
      },
    ],
  });
}

function auditTable(c: CampaignView, people: Directory): Html {
  return table({
    caption: 'Audit trail',
    id: 'campaign-audit',
    empty: 'No one has approved, rejected or stopped this campaign.',
    rows: c.audit,
    columns: [
      { header: 'When', rowHeader: true, cell: (a) => timeEl(a.at) },
      { header: 'Action', cell: (a) => a.action },
      { header: 'By', cell: (a) => person(a.actor, people) },
      {
        header: 'Request',
        nowrap: true,
        cell: (a) =>
          a.notification_id
            ? html`<a href="${href('/notifications', { id: a.notification_id })}" title="${a.notification_id}"
                ><code>${a.notification_id.slice(0, 8)}</code></a
              >`
            : 'every request',
      },
      { header: 'Detail', cell: (a) => detailFields(a.detail) },
    ],
  });
}

/** Everyone the campaign page names: the audit's actors, the deciders, who stopped it. */
function peopleOf(c: CampaignView): (string | null | undefined)[] {
  return [...c.audit.map((a) => a.actor), ...c.fanouts.map((f) => f.decided_by), c.stopped_by];
}

interface Refusal {
  /** Which form the refusal is for. */
  form: 'decide' | 'stop';
  problem?: ApiProblem;
  errors?: Record<string, string>;
  reason?: string;
}

async function campaignPage(ctx: PageContext, c: CampaignView, refusal?: Refusal): Promise<PageResult> {
  const people = await directoryFor(ctx.api.identity, peopleOf(c));
  const id = c.campaign_id;
  const pending = c.fanouts.filter((f) => f.state === 'pending_approval');
  const decideForm =
    pending.length > 0 && c.stopped_at === null
      ? html`<section aria-labelledby="approve-h">
          <h2 id="approve-h">Waiting for approval</h2>
          <p id="approval-text">${approvalText(pending)}</p>
          <form method="post" action="${href(`/campaigns/${encodeURIComponent(id)}/decide`)}" class="stack">
            ${ctx.csrfField()}
            ${field({ name: 'reason', id: 'f-decide-reason', label: 'Reason (kept in the audit trail)', value: refusal?.form === 'decide' ? refusal.reason : '', problem: refusal?.form === 'decide' ? refusal.problem : undefined })}
            <p>
              <button type="submit" name="decision" value="approve">Approve and send</button>
              <button type="submit" name="decision" value="reject" class="secondary">Reject</button>
            </p>
          </form>
        </section>`
      : '';
  const stopForm =
    c.stopped_at === null
      ? html`<section aria-labelledby="stop-h">
          <h2 id="stop-h">Stop the campaign</h2>
          <p>
            The kill switch: expansion stops and every delivery not yet with a provider is cancelled, on every notifier replica.
            <strong>A stopped campaign never resumes</strong>; a new request naming it is refused.
          </p>
          <form method="post" action="${href(`/campaigns/${encodeURIComponent(id)}/stop`)}" class="stack">
            ${ctx.csrfField()}
            ${field({ name: 'reason', id: 'f-stop-reason', label: 'Reason', value: refusal?.form === 'stop' ? refusal.reason : '', problem: refusal?.form === 'stop' ? refusal.problem : undefined })}
            ${checkbox({ name: 'confirm', id: 'f-stop-confirm', label: `Yes, stop ${id} for good` })}
            ${refusal?.form === 'stop' && refusal.errors?.confirm !== undefined && html`<p class="field-error" role="alert">${refusal.errors.confirm}</p>`}
            <p><button type="submit" class="danger">Stop campaign</button></p>
          </form>
        </section>`
      : html`<p class="stopped" role="status">
          Stopped ${timeEl(c.stopped_at)} by ${person(c.stopped_by, people)}${c.stop_reason ? html`: ${c.stop_reason}` : ''}.
        </p>`;
  // A refusal is the answer to a POST: reloading it would offer to send the form again.
  const live = moving(c) && refusal === undefined;
  return ctx.render({
    title: `Campaign ${id}`,
    status: refusal ? 422 : 200,
    ...(refusal?.problem ? { problem: refusal.problem } : {}),
    body: html`<div id="campaign-progress" ${live ? html` data-refresh="5"` : ''}>
        ${details([
          ['Campaign', html`<code>${id}</code>`],
          ['First used', timeEl(c.created_at)],
          ['State', html`<span id="campaign-state">${campaignState(c)}</span>`],
        ])}
        ${totalsTable(c)} ${fanoutTable(c, people)}
        <p><a href="${campaignPath(id)}" data-refresh-link>Refresh</a></p>
      </div>
      ${decideForm} ${stopForm} ${auditTable(c, people)}
      <p><a href="/campaigns">All campaigns</a></p>`,
  });
}

function notFound(ctx: PageContext, id: string): PageResult {
  return ctx.render({
    title: 'No such campaign',
    status: 404,
    body: html`<p>No request has named the campaign <code>${id}</code>.</p>
      <p><a href="/campaigns">All campaigns</a></p>`,
  });
}

export const campaignsPage: ConsolePage = {
  id: 'campaigns',
  title: 'Campaigns',
  path: '/campaigns',
  register(router) {
    router.get('/campaigns', async (ctx) => {
      const lookup = (ctx.request.query.get('id') ?? '').trim();
      if (lookup !== '') return ctx.redirect(campaignPath(lookup));
      const pendingOnly = ctx.request.query.get('pending') === 'true';
      const cursor = ctx.request.query.get('cursor') ?? undefined;
      const page = await listCampaigns(ctx.api.notifier, {
        limit: 50,
        ...(pendingOnly ? { pending: true } : {}),
        ...(cursor ? { cursor } : {}),
      });
      return ctx.render({
        title: 'Campaigns',
        body: html`<form method="get" action="/campaigns" class="inline" role="search">
            ${field({ name: 'id', label: 'Campaign id', hint: 'Open one campaign by its campaign_id.' })}
            <p><button type="submit">Look up</button></p>
          </form>
          <p>
            ${pendingOnly ? html`Showing campaigns waiting for approval. <a href="/campaigns">Show all</a>` : html`<a href="/campaigns?pending=true">Show only those waiting for approval</a>`}
          </p>
          ${table<CampaignSummary>({
            caption: pendingOnly ? 'Campaigns waiting for approval, newest first' : 'Campaigns, newest first',
            id: 'campaigns',
            empty: pendingOnly ? 'No campaign is waiting for approval.' : 'No campaign has been sent yet.',
            rows: page.campaigns,
            columns: [
              { header: 'Campaign', rowHeader: true, cell: (c) => html`<a href="${campaignPath(c.campaign_id)}">${c.campaign_id}</a>` },
              { header: 'First used', cell: (c) => timeEl(c.created_at) },
              { header: 'Requests', numeric: true, cell: (c) => count(c.fanouts) },
              { header: 'Recipients', numeric: true, cell: (c) => count(c.recipients) },
              {
                header: 'State',
                cell: (c) =>
                  c.stopped_at !== null
                    ? html`stopped ${timeEl(c.stopped_at)}`
                    : c.pending_approval > 0
                      ? html`<strong>waiting for approval</strong>`
                      : 'open',
              },
            ],
          })}
          ${page.next_cursor !== undefined && html`<p><a rel="next" href="${href('/campaigns', { pending: pendingOnly ? 'true' : undefined, cursor: page.next_cursor })}">Older campaigns</a></p>`}`,
      });
    });

    router.get('/campaigns/:id', async (ctx) => {
      const id = ctx.request.params[0]!;
      const c = await getCampaign(ctx.api.notifier, id);
      return c ? campaignPage(ctx, c) : notFound(ctx, id);
    });

    router.post('/campaigns/:id/decide', async (ctx) => {
      const id = ctx.request.params[0]!;
      const decision = ctx.request.form.get('decision');
      const reason = (ctx.request.form.get('reason') ?? '').trim();
      if (decision !== 'approve' && decision !== 'reject')
        return ctx.redirect(campaignPath(id), { kind: 'error', text: 'Choose approve or reject.' });
      const r = await formCall(() => decideCampaign(ctx.api.notifier, id, decision, reason ? { reason } : {}));
      if (!r.ok) {
        const c = await getCampaign(ctx.api.notifier, id);
        return c ? campaignPage(ctx, c, { form: 'decide', problem: r.problem, reason }) : notFound(ctx, id);
      }
      const n = r.value.notification_ids.length;
      return ctx.redirect(campaignPath(id), {
        kind: 'success',
        text: `${r.value.decision === 'approved' ? 'Approved' : 'Rejected'} ${n} request${n === 1 ? '' : 's'} of ${id}${r.value.decision === 'approved' ? ': the fan-out starts now' : ''}.`,
      });
    });

    router.post('/campaigns/:id/stop', async (ctx) => {
      const id = ctx.request.params[0]!;
      const reason = (ctx.request.form.get('reason') ?? '').trim();
      if (ctx.request.form.get('confirm') !== 'on') {
        const c = await getCampaign(ctx.api.notifier, id);
        if (!c) return notFound(ctx, id);
        return campaignPage(ctx, c, {
          form: 'stop',
          reason,
          errors: { confirm: 'Tick the box to confirm: a stopped campaign never resumes.' },
        });
      }
      const r = await formCall(() => stopCampaign(ctx.api.notifier, id, reason || undefined));
      if (!r.ok) {
        const c = await getCampaign(ctx.api.notifier, id);
        return c ? campaignPage(ctx, c, { form: 'stop', problem: r.problem, reason }) : notFound(ctx, id);
      }
      const s = r.value;
      const missing = s.replicas.filter((x) => x.acknowledged_at === null).length;
      return ctx.render({
        title: `Campaign ${id} stopped`,
        body: html`<div class="flash ${s.acknowledged ? 'success' : 'error'}" role="${s.acknowledged ? 'status' : 'alert'}">
            ${
              s.already_stopped
                ? `${id} was already stopped (${s.stopped_at}).`
                : s.acknowledged
                  ? `Stopped. Every live notifier replica acknowledged${s.acknowledged_in_ms !== undefined ? ` within ${s.acknowledged_in_ms} ms` : ''}: none of them will start another send of ${id}.`
                  : `Stopped, but ${missing} replica${missing === 1 ? ' has' : 's have'} not acknowledged yet: ${missing === 1 ? 'it' : 'they'} may still be finishing claims in flight.`
            }
          </div>
          ${details([
            ['Stopped at', timeEl(s.stopped_at)],
            ['By', person(s.stopped_by, await directoryFor(ctx.api.identity, [s.stopped_by]))],
            ['Reason', s.reason ?? ''],
          ])}
          ${table({
            caption: 'Notifier replicas',
            id: 'stop-acks',
            empty: 'No notifier replica was alive to acknowledge.',
            rows: s.replicas,
            columns: [
              { header: 'Replica', rowHeader: true, cell: (x) => html`<code>${x.id}</code>` },
              {
                header: 'Acknowledged',
                cell: (x) => (x.acknowledged_at === null ? html`<strong>not yet</strong>` : timeEl(x.acknowledged_at)),
              },
            ],
          })}
          <p><a href="${campaignPath(id)}">Back to the campaign</a></p>`,
      });
    });
  },
};
