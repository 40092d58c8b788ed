/**
 * Provider weights (the notifier's provider ramp): per channel, its providers with their role and
 * live share, the shadow share, a form to move the weights and the shadow share (the ramp), and
 * the history of changes. Each replica applies a change at once; the form only states the new
 * split, the notifier validates it (the weights name the old and the new provider and add up to
 * 100, at most two decimals) and its refusal is shown beside the field it names.
 */
import { html, href, type Html } from '../html.js';
import { details, field, table } from '../forms.js';
import type { ApiProblem } from '../api/problem.js';
import {
  getRamp,
  listRampChanges,
  listRamps,
  putRamp,
  type RampChange,
  type RampChannel,
  type RampView,
} from '../api/notifier-providers.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { directoryFor, person, type Directory } from '../people.js';
import { formCall, timeEl } from './ops-format.js';

const CHANNELS: readonly RampChannel[] = ['push', 'email', 'sms'];
const CHANNEL_TEXT: Record<RampChannel, string> = { push: 'Push', email: 'E-mail', sms: 'SMS' };
/** Inside a sentence. */
const CHANNEL_WORD: Record<RampChannel, string> = { push: 'push', email: 'e-mail', sms: 'SMS' };
const SHADOW_TEXT = {
  validate_only: 'a dry run at the new provider (FCM validate_only): nothing is delivered',
  test_recipients: 'a copy to a configured test recipient, never the user',
} as const;

function isChannel(s: string): s is RampChannel {
  return (CHANNELS as readonly string[]).includes(s);
}

/** The form as typed, by input name (`weights.<provider>`, `shadow_percent`). */
type Typed = Readonly<Record<string, string>>;

/** Reads a percentage as typed: a number when it is one, else the text (the API names what is wrong with it). */
function percentOf(raw: string | null | undefined): number | string | undefined {
  const s = (raw ?? '').trim();
  if (s === '') return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : s;
}

/** The PUT body from the form: only what was filled in, the weights only when both are. */
export function rampChangeOf(view: RampView, form: URLSearchParams): { weights?: Record<string, number>; shadow_percent?: number } {
  const out: { weights?: Record<string, number>; shadow_percent?: number } = {};
  const ramped = view.providers.filter((p) => p.role !== 'secondary');
  const weights: Record<string, number> = {};
  let all = ramped.length > 0;
  for (const p of ramped) {
    const w = percentOf(form.get(`weights.${p.name}`));
    if (w === undefined) all = false;
    // A non-number is passed on as it is: the notifier refuses it naming the field.
    else weights[p.name] = w as number;
  }
  if (all) out.weights = weights;
  const shadow = percentOf(form.get('shadow_percent'));
  if (shadow !== undefined) out.shadow_percent = shadow as number;
  return out;
}

function channelSection(ctx: PageContext, v: RampView, people: Directory, typed?: Typed, problem?: ApiProblem): Html {
  const ramped = v.providers.filter((p) => p.role !== 'secondary');
  const hasNew = v.providers.some((p) => p.role === 'new');
  // A problem about the weights as a whole (they must add up to 100, name both providers).
  const weightsError = problem?.field === 'weights' ? (problem.detail ?? problem.title).replace(/^weights: /, '') : undefined;
  const form = hasNew
    ? html`<form method="post" action="${href(`/providers/${v.channel}`)}" class="stack" aria-label="${CHANNEL_TEXT[v.channel]} weights">
${ctx.csrfField()}
<fieldset${weightsError !== undefined ? html` class="invalid" aria-describedby="${v.channel}-weights-error"` : ''}><legend>Share of live deliveries (percent, adding up to 100)</legend>
${weightsError !== undefined && html`<p class="field-error" id="${v.channel}-weights-error">${weightsError}</p>`}
${ramped.map((p) =>
  field({
    name: `weights.${p.name}`,
    id: `f-${v.channel}-w-${p.name}`,
    label: `${p.name} (${p.role})`,
    type: 'number',
    min: 0,
    max: 100,
    step: '0.01',
    value: typed?.[`weights.${p.name}`] ?? String(p.weight_percent ?? 0),
    problem,
  }),
)}
</fieldset>
${field({
  name: 'shadow_percent',
  id: `f-${v.channel}-shadow`,
  label: 'Shadow share (percent of the old provider’s first attempts also sent to the new one)',
  type: 'number',
  min: 0,
  max: 100,
  step: '0.01',
  value: typed?.['shadow_percent'] ?? String(v.shadow_percent),
  hint: v.shadow
    ? `A shadow copy is ${SHADOW_TEXT[v.shadow]}.`
    : 'No shadow copy can be sent on this channel (no test recipients configured).',
  problem,
})}
<p><button type="submit">Apply to every replica</button></p>
</form>`
    : html`<p>
        No new provider is configured for ${CHANNEL_WORD[v.channel]}
        (<code>${v.channel === 'push' ? 'FCM' : v.channel === 'email' ? 'SMTP' : 'SMS'}_RAMP_URL</code>): nothing to ramp.
      </p>`;
  return html`<section aria-labelledby="ch-${v.channel}" data-channel="${v.channel}">
    <h2 id="ch-${v.channel}">${CHANNEL_TEXT[v.channel]}</h2>
    ${table({
      caption: `${CHANNEL_TEXT[v.channel]} providers`,
      id: `providers-${v.channel}`,
      rows: v.providers,
      columns: [
        { header: 'Provider', rowHeader: true, cell: (p) => p.name },
        { header: 'Role', cell: (p) => (p.role === 'secondary' ? 'secondary (failovers only)' : p.role) },
        { header: 'Live share', numeric: true, cell: (p) => (p.weight_percent === undefined ? '—' : `${p.weight_percent}%`) },
      ],
    })}
    ${details([
      ['Shadow share', `${v.shadow_percent}%`],
      [
        'Last changed',
        v.updated_at === null ? 'never' : html`${timeEl(v.updated_at)} by ${v.updated_by ? person(v.updated_by, people) : 'unknown'}`,
      ],
    ])}
    ${form}
    <p><a href="${href(`/providers/${v.channel}/history`)}">History of ${CHANNEL_WORD[v.channel]} changes</a></p>
  </section>`;
}

async function overview(ctx: PageContext, refused?: { channel: RampChannel; typed: Typed; problem: ApiProblem }): Promise<PageResult> {
  const views = await listRamps(ctx.api.notifier);
  const people = await directoryFor(
    ctx.api.identity,
    views.map((v) => v.updated_by),
  );
  return ctx.render({
    title: 'Provider weights',
    ...(refused ? { status: 422, problem: refused.problem } : {}),
    body: html`<p>
        A new provider is ramped in beside a channel's old one: its share of live deliveries moves by these weights (sticky per delivery), a
        shadow share measures it without reaching users, and the old provider stays its failover.
      </p>
      ${views.map((v) => (refused && refused.channel === v.channel ? channelSection(ctx, v, people, refused.typed, refused.problem) : channelSection(ctx, v, people)))}`,
  });
}

export const providersPage: ConsolePage = {
  id: 'providers',
  title: 'Provider weights',
  path: '/providers',
  register(router) {
    router.get('/providers', (ctx) => overview(ctx));

    router.post('/providers/:channel', async (ctx) => {
      const channel = ctx.request.params[0]!;
      if (!isChannel(channel))
        return ctx.redirect('/providers', { kind: 'error', text: `${channel} is not a channel providers are ramped on.` });
      const view = await getRamp(ctx.api.notifier, channel);
      const change = rampChangeOf(view, ctx.request.form);
      const typed: Record<string, string> = {};
      for (const [k, v] of ctx.request.form) typed[k] = v;
      const r = await formCall(() => putRamp(ctx.api.notifier, channel, change));
      if (!r.ok) return overview(ctx, { channel, typed, problem: r.problem });
      const split = r.value.providers
        .filter((p) => p.weight_percent !== undefined)
        .map((p) => `${p.name} ${p.weight_percent}%`)
        .join(', ');
      return ctx.redirect(`/providers#ch-${channel}`, {
        kind: 'success',
        text: `${CHANNEL_TEXT[channel]}: ${split}; shadow ${r.value.shadow_percent}%. Every replica applies it now.`,
      });
    });

    router.get('/providers/:channel/history', async (ctx) => {
      const channel = ctx.request.params[0]!;
      if (!isChannel(channel)) {
        return ctx.render({ title: 'No such channel', status: 404, body: html`<p>Providers are ramped on push, e-mail and SMS.</p>` });
      }
      const [view, changes] = await Promise.all([getRamp(ctx.api.notifier, channel), listRampChanges(ctx.api.notifier, channel, 100)]);
      const newName = view.providers.find((p) => p.role === 'new')?.name ?? 'new provider';
      const people = await directoryFor(
        ctx.api.identity,
        changes.map((c) => c.changed_by),
      );
      return ctx.render({
        title: `${CHANNEL_TEXT[channel]} provider changes`,
        body: html`${table<RampChange>({
            caption: `Changes, newest first (the share is ${newName}'s)`,
            id: 'ramp-changes',
            empty: 'No change has been made on this channel.',
            rows: changes,
            columns: [
              { header: 'When', rowHeader: true, cell: (c) => timeEl(c.changed_at) },
              { header: 'By', cell: (c) => person(c.changed_by, people) },
              { header: 'Share', numeric: true, cell: (c) => `${c.previous_weight_percent}% → ${c.weight_percent}%` },
              { header: 'Shadow', numeric: true, cell: (c) => `${c.previous_shadow_percent}% → ${c.shadow_percent}%` },
            ],
          })}
          <p><a href="/providers">Provider weights</a></p>`,
      });
    });
  },
};
