/**
 * Quotas (the control plane's records): list and search by subject kind and prefix (or look an API
 * key up: it is hashed here, the raw key goes nowhere), open a subject's record, edit it with
 * validation (the console's checks first, then the control plane's, each shown beside its field),
 * and after a save, which sidecars acked the new version and which lag (the PUT's answer), with
 * every connected sidecar's acked version below the form.
 */
import { html, href, type Html } from '../html.js';
import { checkbox, details, field, select, table } from '../forms.js';
import type { ApiProblem } from '../api/problem.js';
import {
  ALGORITHMS,
  apiKeySubject,
  getQuota,
  listQuotas,
  listSidecars,
  putQuota,
  SUBJECT_KINDS,
  UNITS,
  type Quota,
  type QuotaInput,
  type SubjectKind,
} from '../api/control-plane.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { formCall, timeEl } from './ops-format.js';

const KIND_TEXT: Record<SubjectKind, string> = { key: 'API key', user: 'user', tenant: 'tenant', plan: 'plan' };
const UNIT_MS: Record<string, number> = { second: 1000, minute: 60_000, hour: 3_600_000, day: 86_400_000 };

function subjectHref(subject: string): string {
  return href(`/quotas/s/${encodeURIComponent(subject)}`);
}

/** `5 / minute`, `5 / 1500 ms`, or the plan a record refers to. */
export function rateText(q: Quota): string {
  if (!q.rate) return q.plan ? `plan ${q.plan}` : '—';
  if (q.unit) return `${q.rate} / ${q.unit}`;
  const ms = q.interval_ms ?? 0;
  const unit = Object.entries(UNIT_MS).find(([, v]) => v === ms)?.[0];
  return unit ? `${q.rate} / ${unit}` : `${q.rate} / ${ms} ms`;
}

async function listPage(ctx: PageContext): Promise<PageResult> {
  const q = ctx.request.query;
  const rawKind = q.get('kind') ?? '';
  const kind = (SUBJECT_KINDS as readonly string[]).includes(rawKind) ? (rawKind as SubjectKind) : undefined;
  const prefix = (q.get('prefix') ?? '').trim();
  const cursor = q.get('cursor') ?? undefined;
  const listed = await formCall(() =>
    listQuotas(ctx.api.controlPlane, { subjectKind: kind, prefix: prefix || undefined, cursor, limit: 50 }),
  );
  const quotas = listed.ok ? listed.value.quotas : [];
  const next = listed.ok ? listed.value.next_cursor : null;
  const body = html`<section aria-labelledby="search-h">
      <h2 id="search-h">Search by subject</h2>
      <form method="get" action="/quotas" class="inline" role="search">
        ${select({
          name: 'kind',
          label: 'Kind',
          value: kind ?? '',
          options: [{ value: '', label: 'any' }, ...SUBJECT_KINDS.map((k) => ({ value: k, label: KIND_TEXT[k] }))],
          problem: listed.ok ? undefined : listed.problem,
          errors: {},
        })}
        ${field({
          name: 'prefix',
          label: 'Subject starts with',
          value: prefix,
          type: 'search',
          hint: 'The start of the subject id: user:42, tenant:acme, plan:pro.',
          problem: listed.ok ? undefined : listed.problem,
        })}
        <p><button type="submit">Search</button></p>
      </form>
      <form method="post" action="/quotas/lookup" class="inline">
        ${ctx.csrfField()}
        ${field({ name: 'api_key', label: 'Or an API key', type: 'password', autocomplete: 'off', hint: 'Hashed by the console; only key:<SHA-256> is looked up.' })}
        <p><button type="submit" class="secondary">Find the key's quota</button></p>
      </form>
      <p><a href="/quotas/new">Set a quota for another subject</a></p>
    </section>
    ${table<Quota>({
      caption: kind || prefix ? 'Matching quota records, by subject' : 'Quota records, by subject',
      id: 'quotas',
      empty: kind || prefix ? 'No record matches.' : 'There are no quota records yet.',
      rows: quotas,
      columns: [
        { header: 'Subject', rowHeader: true, cell: (r) => html`<a href="${subjectHref(r.subject_id)}"><code>${r.subject_id}</code></a>` },
        { header: 'Algorithm', cell: (r) => r.algorithm ?? '—' },
        { header: 'Rate', cell: (r) => rateText(r) },
        { header: 'Burst', numeric: true, cell: (r) => r.burst ?? 0 },
        { header: 'Cost', numeric: true, cell: (r) => r.cost ?? 1 },
        { header: 'Fail mode', cell: (r) => r.fail_mode ?? 'route default' },
        { header: 'Shadow', cell: (r) => (r.shadow ? 'yes' : 'no') },
        { header: 'Version', numeric: true, cell: (r) => String(r.version ?? '') },
        { header: 'Updated', cell: (r) => timeEl(r.updated_at) },
      ],
    })}
    ${next && html`<p><a href="${href('/quotas', { kind, prefix, cursor: next })}" rel="next">Next page</a></p>`}`;
  return ctx.render({ title: 'Quotas', body });
}

/** The form's values: a record's, or what the operator sent. */
interface FormValues {
  algorithm: string;
  rate: string;
  burst: string;
  unit: string;
  interval_ms: string;
  cost: string;
  fail_mode: string;
  shadow: boolean;
  plan: string;
  accuracy: string;
}

function valuesOf(q: Quota | undefined): FormValues {
  return {
    algorithm: q?.algorithm ?? 'token_bucket',
    rate: String(q?.rate ?? ''),
    burst: String(q?.burst ?? ''),
    unit: q?.unit ?? (q?.interval_ms ? (Object.entries(UNIT_MS).find(([, v]) => v === q.interval_ms)?.[0] ?? '') : 'minute'),
    interval_ms: q?.unit ? '' : q?.interval_ms && !Object.values(UNIT_MS).includes(q.interval_ms) ? String(q.interval_ms) : '',
    cost: String(q?.cost ?? 1),
    fail_mode: q?.fail_mode ?? '',
    shadow: q?.shadow ?? false,
    plan: q?.plan ?? '',
    accuracy: q?.accuracy ?? 'exact',
  };
}

function valuesFromForm(f: URLSearchParams): FormValues {
  const g = (k: string) => (f.get(k) ?? '').trim();
  return {
    algorithm: g('algorithm'),
    rate: g('rate'),
    burst: g('burst'),
    unit: g('unit'),
    interval_ms: g('interval_ms'),
    cost: g('cost'),
    fail_mode: g('fail_mode'),
    shadow: f.get('shadow') === 'on',
    plan: g('plan'),
    accuracy: g('accuracy'),
  };
}

const UINT32_MAX = 4_294_967_295;

/**
 * The console's own checks (the control plane checks again; these only catch what a form can get
 * wrong before a round trip): whole numbers in range, a unit or an interval. A record with rate 0
 * is a plan reference and needs only the plan.
 */
export function validateQuotaForm(v: FormValues, existing: Quota | undefined): { input?: QuotaInput; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  const int = (name: keyof FormValues, raw: string, min: number, required: boolean): number | undefined => {
    if (raw === '') {
      if (required) errors[name] = 'required';
      return undefined;
    }
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > UINT32_MAX) {
      errors[name] = `must be a whole number from ${min} to ${UINT32_MAX}`;
      return undefined;
    }
    return Number(raw);
  };
  const rate = int('rate', v.rate, 0, true);
  const planRef = rate === 0;
  const burst = int('burst', v.burst, 0, !planRef);
  const cost = int('cost', v.cost, 1, false);
  const intervalMs = int('interval_ms', v.interval_ms, 1, false);
  if (!planRef && !(ALGORITHMS as readonly string[]).includes(v.algorithm)) errors.algorithm = `must be one of ${ALGORITHMS.join(', ')}`;
  if (v.unit !== '' && !(UNITS as readonly string[]).includes(v.unit)) errors.unit = `must be one of ${UNITS.join(', ')}`;
  if (!planRef && v.unit === '' && intervalMs === undefined && !errors.interval_ms)
    errors.unit = 'choose a unit, or give an interval in ms';
  if (v.unit !== '' && v.interval_ms !== '') errors.interval_ms = 'give a unit or an interval, not both';
  if (planRef && v.plan === '') errors.plan = 'a record with rate 0 refers to a plan: name it';
  if (!['', 'open', 'closed'].includes(v.fail_mode)) errors.fail_mode = 'must be open, closed or the route default';
  if (!['exact', 'approximate'].includes(v.accuracy)) errors.accuracy = 'must be exact or approximate';
  if (Object.keys(errors).length > 0) return { errors };
  const input: QuotaInput = {
    rate: rate!,
    ...(planRef ? {} : { algorithm: v.algorithm as QuotaInput['algorithm'], burst: burst! }),
    ...(v.unit !== '' ? { unit: v.unit as QuotaInput['unit'] } : intervalMs !== undefined ? { interval_ms: intervalMs } : {}),
    cost: cost ?? 1,
    shadow: v.shadow,
    ...(v.fail_mode !== '' ? { fail_mode: v.fail_mode as 'open' | 'closed' } : {}),
    ...(v.plan !== '' ? { plan: v.plan } : {}),
    ...(v.accuracy === 'approximate' ? { accuracy: 'approximate' as const } : {}),
    // The PUT replaces the whole record: per-route rules, which this form does not edit, go back as they were.
    ...(existing?.routes && existing.routes.length > 0 ? { routes: existing.routes } : {}),
  };
  return { input, errors };
}

function quotaForm(
  ctx: PageContext,
  action: string,
  v: FormValues,
  o: { problem?: ApiProblem; errors?: Record<string, string>; subjectField?: Html },
): Html {
  const common = { problem: o.problem, errors: o.errors };
  return html`<form method="post" action="${action}" novalidate>
    ${ctx.csrfField()} ${o.subjectField}
    <div class="cols">
      <div>
        ${select({
          name: 'algorithm',
          label: 'Algorithm',
          value: v.algorithm,
          options: ALGORITHMS.map((a) => ({ value: a, label: a.replace('_', ' ') })),
          ...common,
        })}
        ${field({ name: 'rate', label: 'Rate', type: 'number', min: 0, value: v.rate, required: true, hint: 'Requests per unit; 0 makes the record refer to a plan.', ...common })}
        ${field({ name: 'burst', label: 'Burst', type: 'number', min: 0, value: v.burst, hint: 'The most requests at once (bucket capacity).', ...common })}
        ${select({
          name: 'unit',
          label: 'Per',
          value: v.unit,
          options: [...UNITS.map((u) => ({ value: u, label: u })), { value: '', label: 'an interval in ms (below)' }],
          ...common,
        })}
        ${field({ name: 'interval_ms', label: 'Interval (ms)', type: 'number', min: 1, value: v.interval_ms, hint: 'Only when “Per” is an interval.', ...common })}
      </div>
      <div>
        ${field({ name: 'cost', label: 'Cost per request', type: 'number', min: 1, value: v.cost, ...common })}
        ${select({
          name: 'fail_mode',
          label: 'When Redis is unreachable',
          value: v.fail_mode,
          options: [
            { value: '', label: 'the route class decides' },
            { value: 'open', label: 'fail open (allow, under an emergency cap)' },
            { value: 'closed', label: 'fail closed (deny)' },
          ],
          ...common,
        })}
        ${select({
          name: 'accuracy',
          label: 'Accuracy',
          value: v.accuracy,
          options: [
            { value: 'exact', label: 'exact' },
            { value: 'approximate', label: 'approximate (leases; token and leaky buckets)' },
          ],
          ...common,
        })}
        ${field({ name: 'plan', label: 'Plan', value: v.plan, hint: 'A plan name, for a record that refers to a plan.', ...common })}
        ${checkbox({ name: 'shadow', label: 'Shadow mode (count and report, never deny)', checked: v.shadow })}
      </div>
    </div>
    <p><button type="submit">Save quota</button></p>
  </form>`;
}

async function sidecarTable(ctx: PageContext, version: number | string | undefined): Promise<Html> {
  const s = await formCall(() => listSidecars(ctx.api.controlPlane));
  if (!s.ok) return html`<p class="empty">The sidecars' state could not be read: ${s.problem.detail ?? s.problem.title}</p>`;
  return html`<section aria-labelledby="sidecars-h">
    <h2 id="sidecars-h">Sidecars</h2>
    <p>
      The control plane is at version
      ${String(s.value.version)}${version !== undefined ? html`; this record is version ${String(version)}` : ''}.
    </p>
    ${table({
      caption: 'Connected sidecars and the version each acked',
      id: 'sidecars',
      empty: 'No sidecar is connected to the control plane.',
      rows: s.value.sidecars,
      columns: [
        { header: 'Sidecar', rowHeader: true, cell: (c) => html`<code>${c.sidecar_id}</code>` },
        { header: 'Acked version', numeric: true, cell: (c) => String(c.acked_version) },
        {
          header: 'State',
          cell: (c) => (c.lagging ? html`<span class="badge wait">lagging</span>` : html`<span class="badge ok">up to date</span>`),
        },
      ],
    })}
  </section>`;
}

function recordDetails(q: Quota): Html {
  return details([
    ['Subject', html`<code>${q.subject_id}</code>`],
    ['Rate', rateText(q)],
    ['Version', String(q.version ?? '')],
    ['Updated', timeEl(q.updated_at)],
    [
      'Per-route rules',
      q.routes && q.routes.length > 0
        ? html`<ul>
            ${q.routes.map((r) => html`<li><code>${JSON.stringify(r)}</code></li>`)}
          </ul>`
        : 'none (kept as they are on save)',
    ],
  ]);
}

async function subjectPage(
  ctx: PageContext,
  subject: string,
  o: { values?: FormValues; problem?: ApiProblem; errors?: Record<string, string>; status?: number } = {},
): Promise<PageResult> {
  const q = await getQuota(ctx.api.controlPlane, subject);
  const body = html`<p><a href="/quotas">All quotas</a></p>
    ${q ? recordDetails(q) : html`<p>This subject has no quota record yet: saving creates one.</p>`}
    <h2>Edit</h2>
    ${quotaForm(ctx, subjectHref(subject), o.values ?? valuesOf(q), { problem: o.problem, errors: o.errors })}
    ${await sidecarTable(ctx, q?.version)}`;
  return ctx.render({ title: `Quota of ${subject}`, body, status: o.status, problem: o.problem });
}

/** Saves and redirects to the record, telling which sidecars acked. */
async function save(
  ctx: PageContext,
  subject: string,
  onError: (o: { values: FormValues; problem?: ApiProblem; errors?: Record<string, string> }) => Promise<PageResult>,
): Promise<PageResult> {
  const values = valuesFromForm(ctx.request.form);
  const existing = await getQuota(ctx.api.controlPlane, subject);
  const { input, errors } = validateQuotaForm(values, existing);
  if (!input) return onError({ values, errors });
  const r = await formCall(() => putQuota(ctx.api.controlPlane, subject, input));
  if (!r.ok) return onError({ values, problem: r.problem });
  const acked = r.value.acked_sidecar_ids ?? [];
  const lagging = r.value.lagging_sidecar_ids ?? [];
  return ctx.redirect(
    subjectHref(subject),
    {
      kind: 'success',
      text: `${r.value.created ? 'Created' : 'Saved'} version ${String(r.value.version)} of ${subject}. Acked by ${
        acked.length > 0 ? acked.join(', ') : 'no sidecar'
      }.`,
    },
    ...(lagging.length > 0
      ? [{ kind: 'error' as const, text: `Not acked in time by: ${lagging.join(', ')} (they apply it when they catch up).` }]
      : []),
  );
}

function subjectFromForm(f: URLSearchParams): { subject?: string; errors: Record<string, string> } {
  const kind = f.get('kind') ?? '';
  const id = (f.get('id') ?? '').trim();
  if (!(SUBJECT_KINDS as readonly string[]).includes(kind)) return { errors: { kind: 'choose a kind' } };
  if (id === '') return { errors: { id: 'required' } };
  if (kind === 'key') return { subject: apiKeySubject(id), errors: {} };
  return { subject: `${kind}:${id}`, errors: {} };
}

function newForm(
  ctx: PageContext,
  f: URLSearchParams | undefined,
  o: { problem?: ApiProblem; errors?: Record<string, string>; status?: number },
): PageResult {
  const values = f ? valuesFromForm(f) : valuesOf(undefined);
  const subjectField = html`<fieldset>
    <legend>Subject</legend>
    ${select({
      name: 'kind',
      label: 'Kind',
      value: f?.get('kind') ?? 'user',
      options: SUBJECT_KINDS.map((k) => ({ value: k, label: KIND_TEXT[k] })),
      errors: o.errors,
    })}
    ${field({
      name: 'id',
      label: 'Id',
      value: f?.get('kind') === 'key' ? '' : (f?.get('id') ?? ''),
      required: true,
      hint: 'A user id, tenant id or plan name; for an API key, the raw key (hashed here, never sent).',
      errors: o.errors,
      problem: o.problem?.field === 'subject_id' ? { ...o.problem, field: 'id' } : undefined,
    })}
  </fieldset>`;
  return ctx.render({
    title: 'New quota',
    status: o.status,
    problem: o.problem,
    body: html`<p><a href="/quotas">All quotas</a></p>
      ${quotaForm(ctx, '/quotas/new', values, { ...o, subjectField })}`,
  });
}

export const quotasPage: ConsolePage = {
  id: 'quotas',
  title: 'Quotas',
  path: '/quotas',
  register(r) {
    r.get('/quotas', listPage);
    r.post('/quotas/lookup', (ctx) => {
      const key = ctx.request.form.get('api_key') ?? '';
      if (key === '') return ctx.redirect('/quotas', { kind: 'error', text: 'Give an API key to look up.' });
      return ctx.redirect(subjectHref(apiKeySubject(key)));
    });
    r.get('/quotas/new', (ctx) => newForm(ctx, undefined, {}));
    r.post('/quotas/new', async (ctx) => {
      const { subject, errors } = subjectFromForm(ctx.request.form);
      if (!subject) return newForm(ctx, ctx.request.form, { errors, status: 422 });
      return save(ctx, subject, async (o) => newForm(ctx, ctx.request.form, { ...o, status: 422 }));
    });
    r.get('/quotas/s/:subject', (ctx) => subjectPage(ctx, ctx.request.params[0]!));
    r.post('/quotas/s/:subject', (ctx) => {
      const subject = ctx.request.params[0]!;
      return save(ctx, subject, (o) => subjectPage(ctx, subject, { ...o, status: 422 }));
    });
  },
};
