/**
 * Segments (the notifier's campaign audiences): the list, one segment with its versions, a list
 * segment's members uploaded from a file (NDJSON or CSV, a new version switched in when the last
 * line is stored), and rule segments created or changed from a form.
 *
 * The upload is streamed: the browser's multipart body is read as it arrives and its file passed
 * on to the notifier's `PUT …/members` chunk by chunk (multipart.ts, api/notifier-segments.ts), so
 * the console never holds a list of a million ids. A refused upload (a bad line, too large, another
 * upload running) leaves the live version as it was, and the page says which line and why.
 */
import { html, href, type Html } from '../html.js';
import { checkbox, details, field, select, table } from '../forms.js';
import type { ApiProblem } from '../api/problem.js';
import {
  deleteSegment,
  getSegment,
  listSegments,
  listVersions,
  putRuleSegment,
  uploadMembers,
  type SegmentRule,
  type SegmentVersion,
  type SegmentView,
  type UploadFormat,
} from '../api/notifier-segments.js';
import type { UploadedFile } from '../multipart.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { directoryFor, person } from '../people.js';
import { count, formCall, timeEl } from './ops-format.js';

/**
 * The largest upload the console passes on: the notifier's default cap (NOTIFIER_SEGMENT_MAX_BYTES,
 * 128 MiB) plus room for the multipart envelope; the notifier's own cap is what refuses a list.
 */
export const UPLOAD_MAX_BYTES = 128 * 1024 * 1024 + 64 * 1024;

/** The console's own refusal of a form without a segment id (the API would see no path at all). */
const MISSING_ID: ApiProblem = {
  title: 'Segment id missing',
  status: 400,
  code: 'invalid_field',
  field: 'segment_id',
  detail: 'segment_id: give the segment an id',
};

const segmentPath = (id: string): string => href(`/segments/${encodeURIComponent(id)}`);

/** What the rule form holds, as typed. */
interface RuleForm {
  id: string;
  locale: string;
  timezone: string;
  tags: string;
}

export function ruleOf(f: RuleForm): SegmentRule {
  const rule: SegmentRule = {};
  if (f.locale !== '') rule.locale = f.locale;
  if (f.timezone !== '') rule.timezone = f.timezone;
  const tags = f.tags
    .split(/[\s,]+/)
    .map((t) => t.trim())
    .filter((t) => t !== '');
  if (tags.length > 0) rule.tags = tags;
  return rule;
}

export function readRuleForm(form: URLSearchParams, id?: string): RuleForm {
  return {
    id: id ?? (form.get('segment_id') ?? '').trim(),
    locale: (form.get('locale') ?? '').trim(),
    timezone: (form.get('timezone') ?? '').trim(),
    tags: (form.get('tags') ?? '').trim(),
  };
}

/**
 * The notifier names a rule's fields `rule.locale`, a segment id `segment_id`; the form's
 * controls are `locale`, `segment_id`: map one onto the other for `field(…, { problem })`.
 */
export function formProblem(p: ApiProblem | undefined): ApiProblem | undefined {
  if (!p?.field) return p;
  if (p.field === 'rule') return { ...p, field: 'locale' };
  if (p.field.startsWith('rule.')) {
    const name = p.field.slice(5);
    return {
      ...p,
      field: name,
      ...(p.detail?.startsWith(`${p.field}: `) ? { detail: `${name}: ${p.detail.slice(p.field.length + 2)}` } : {}),
    };
  }
  return p;
}

function ruleFormHtml(ctx: PageContext, action: string, f: RuleForm, withId: boolean, problem?: ApiProblem): Html {
  const p = formProblem(problem);
  return html`<form method="post" action="${action}" class="stack" aria-label="Rule segment">
    ${ctx.csrfField()}
    ${withId && field({ name: 'segment_id', id: 'f-rule-segment-id', label: 'Segment id', value: f.id, required: true, hint: '1–128 visible characters, no /.', problem: p })}
    ${field({ name: 'locale', label: 'Locale', value: f.locale, hint: 'e.g. fr or fr_CA (fr matches fr only).', problem: p })}
    ${field({ name: 'timezone', label: 'Time zone', value: f.timezone, hint: 'An IANA zone, e.g. Europe/Paris.', problem: p })}
    ${field({ name: 'tags', label: 'Tags', value: f.tags, hint: 'Space- or comma-separated; a profile must have every one.', problem: p })}
    <p class="hint">At least one of locale, time zone and tags. A rule is read live: a profile change shows at once.</p>
    <p><button type="submit">Save rule segment</button></p>
  </form>`;
}

interface UploadFormState {
  id: string;
  format: string;
  problem?: ApiProblem;
  /** The console's own message for the file control. */
  fileError?: string;
}

function uploadFormHtml(ctx: PageContext, action: string, s: UploadFormState, withId: boolean): Html {
  // The notifier names a bad line `line 12`: shown beside the file it is in.
  const lineProblem = s.problem?.field?.startsWith('line ') ? s.problem : undefined;
  const fileError =
    s.fileError ??
    (lineProblem ? `${lineProblem.field}: ${(lineProblem.detail ?? lineProblem.title).replace(/^line \d+: /, '')}` : undefined);
  return html`<form method="post" action="${action}" enctype="multipart/form-data" class="stack" aria-label="Upload members">
    ${ctx.csrfField()}
    ${withId && field({ name: 'segment_id', id: 'f-upload-segment-id', label: 'Segment id', value: s.id, required: true, hint: 'A new id creates a list segment; an existing one gets a new version.', problem: s.problem })}
    ${select({
      name: 'format',
      label: 'File format',
      value: s.format,
      options: [
        { value: 'ndjson', label: 'NDJSON: one "user id" (or {"user_id": …}) per line' },
        { value: 'csv', label: 'CSV: one column of user ids, optionally headed user_id' },
      ],
    })}
    <div class="field${fileError !== undefined ? ' invalid' : ''}">
      <label for="f-file">Member file <span class="req" aria-hidden="true">*</span></label>
      <input
        id="f-file"
        name="file"
        type="file"
        required
        accept=".ndjson,.jsonl,.json,.csv,.txt,application/x-ndjson,text/csv,text/plain"
        aria-describedby="f-file-hint${fileError !== undefined ? ' f-file-error' : ''}"
        ${fileError !== undefined ? html` aria-invalid="true"` : ''}
      />
      <p class="hint" id="f-file-hint">Up to 128 MiB; repeated ids count once. Nothing changes unless every line is valid.</p>
      ${fileError !== undefined && html`<p class="field-error" id="f-file-error">${fileError}</p>`}
    </div>
    <p><button type="submit">Upload members</button></p>
  </form>`;
}

async function listPage(
  ctx: PageContext,
  refused?: { kind: 'upload'; state: UploadFormState } | { kind: 'rule'; form: RuleForm; problem: ApiProblem },
): Promise<PageResult> {
  const cursor = ctx.request.query.get('cursor') ?? undefined;
  const page = await listSegments(ctx.api.notifier, { limit: 100, ...(cursor ? { cursor } : {}) });
  const people = await directoryFor(
    ctx.api.identity,
    page.segments.map((x) => x.updated_by),
  );
  return ctx.render({
    title: 'Segments',
    ...(refused ? { status: 422, problem: refused.kind === 'upload' ? refused.state.problem : refused.problem } : {}),
    body: html`${table<SegmentView>({
        caption: 'Segments, by id',
        id: 'segments',
        empty: 'No segment yet: upload a list or define a rule below.',
        rows: page.segments,
        columns: [
          { header: 'Segment', rowHeader: true, cell: (s) => html`<a href="${segmentPath(s.id)}">${s.id}</a>` },
          { header: 'Kind', cell: (s) => s.kind },
          { header: 'Version', numeric: true, cell: (s) => s.version },
          {
            header: 'Members',
            numeric: true,
            cell: (s) => (s.size === null ? html`<span title="counted when the segment is opened">live rule</span>` : count(s.size)),
          },
          { header: 'Updated', cell: (s) => html`${timeEl(s.updated_at)}${s.updated_by ? html` by ${person(s.updated_by, people)}` : ''}` },
        ],
      })}
      ${page.next_cursor !== undefined && html`<p><a rel="next" href="${href('/segments', { cursor: page.next_cursor })}">More segments</a></p>`}
      <section aria-labelledby="upload-h">
        <h2 id="upload-h">Upload a list</h2>
        ${uploadFormHtml(ctx, '/segments/upload', refused?.kind === 'upload' ? refused.state : { id: '', format: 'ndjson' }, true)}
      </section>
      <section aria-labelledby="rule-h">
        <h2 id="rule-h">Define a rule segment</h2>
        ${ruleFormHtml(ctx, '/segments/rule', refused?.kind === 'rule' ? refused.form : { id: '', locale: '', timezone: '', tags: '' }, true, refused?.kind === 'rule' ? refused.problem : undefined)}
      </section>`,
  });
}

function notFound(ctx: PageContext, id: string): PageResult {
  return ctx.render({
    title: 'No such segment',
    status: 404,
    body: html`<p>There is no segment <code>${id}</code>.</p>
      <p><a href="/segments">All segments</a></p>`,
  });
}

async function segmentPage(
  ctx: PageContext,
  s: SegmentView,
  refused?:
    { kind: 'upload'; state: UploadFormState } | { kind: 'rule'; form: RuleForm; problem: ApiProblem } | { kind: 'delete'; error: string },
): Promise<PageResult> {
  const versions = s.kind === 'list' ? await listVersions(ctx.api.notifier, s.id, 20) : [];
  const people = await directoryFor(ctx.api.identity, [s.updated_by, ...versions.map((v) => v.created_by)]);
  const rule = s.rule ?? {};
  const change =
    s.kind === 'list'
      ? html`<section aria-labelledby="upload-h">
          <h2 id="upload-h">Upload a new version</h2>
          <p>The new version is switched in when its last line is stored; campaigns already expanding keep the version they pinned.</p>
          ${uploadFormHtml(ctx, href(`/segments/${encodeURIComponent(s.id)}/upload`), refused?.kind === 'upload' ? refused.state : { id: s.id, format: 'ndjson' }, false)}
        </section>`
      : html`<section aria-labelledby="rule-h">
          <h2 id="rule-h">Change the rule</h2>
          ${ruleFormHtml(
            ctx,
            href(`/segments/${encodeURIComponent(s.id)}/rule`),
            refused?.kind === 'rule'
              ? refused.form
              : { id: s.id, locale: rule.locale ?? '', timezone: rule.timezone ?? '', tags: (rule.tags ?? []).join(' ') },
            false,
            refused?.kind === 'rule' ? refused.problem : undefined,
          )}
        </section>`;
  return ctx.render({
    title: `Segment ${s.id}`,
    ...(refused
      ? {
          status: 422,
          ...(refused.kind !== 'delete' ? { problem: refused.kind === 'upload' ? refused.state.problem : refused.problem } : {}),
        }
      : {}),
    body: html`${details([
        ['Segment', html`<code>${s.id}</code>`],
        ['Kind', s.kind === 'list' ? 'stored list' : 'rule over recipient profiles'],
        ['Live version', s.version],
        ['Members', html`<span id="segment-size">${count(s.size)}</span>${s.kind === 'rule' ? ' (profiles matching now)' : ''}`],
        ...(s.kind === 'rule'
          ? ([
              ['Locale', rule.locale ?? ''],
              ['Time zone', rule.timezone ?? ''],
              ['Tags', (rule.tags ?? []).join(', ')],
            ] as const)
          : []),
        ['Updated', html`${timeEl(s.updated_at)}${s.updated_by ? html` by ${person(s.updated_by, people)}` : ''}`],
      ])}
      ${
        s.kind === 'list' &&
        table<SegmentVersion>({
          caption: 'Versions, newest first',
          id: 'segment-versions',
          rows: versions,
          columns: [
            { header: 'Version', rowHeader: true, cell: (v) => v.version },
            { header: 'State', cell: (v) => html`<span data-state="${v.state}">${v.state}</span>${v.purged ? ' (members deleted)' : ''}` },
            { header: 'Members', numeric: true, cell: (v) => count(v.size) },
            { header: 'Uploaded by', cell: (v) => person(v.created_by, people) },
            { header: 'Started', cell: (v) => timeEl(v.created_at) },
            { header: 'Completed', cell: (v) => timeEl(v.completed_at) },
          ],
        })
      }
      ${change}
      <section aria-labelledby="delete-h">
        <h2 id="delete-h">Delete</h2>
        <form method="post" action="${href(`/segments/${encodeURIComponent(s.id)}/delete`)}" class="stack">
          ${ctx.csrfField()}
          ${checkbox({ name: 'confirm', id: 'f-delete-confirm', label: `Yes, delete ${s.id} (campaigns already expanding it go on with their version)` })}
          ${refused?.kind === 'delete' && html`<p class="field-error" role="alert">${refused.error}</p>`}
          <p><button type="submit" class="danger">Delete segment</button></p>
        </form>
      </section>
      <p><a href="/segments">All segments</a></p>`,
  });
}

/** Streams the uploaded file to the notifier; the page's answer for each outcome. */
async function receiveUpload(
  ctx: PageContext,
  file: UploadedFile | undefined,
  id: string,
  back: (state: UploadFormState) => Promise<PageResult>,
): Promise<PageResult> {
  const rawFormat = ctx.request.form.get('format') ?? 'ndjson';
  const format: UploadFormat = rawFormat === 'csv' ? 'csv' : 'ndjson';
  const state: UploadFormState = { id, format };
  if (id === '') return back({ ...state, problem: MISSING_ID });
  if (!file || file.filename === '') return back({ ...state, fileError: 'Choose a file to upload.' });
  const r = await formCall(() => uploadMembers(ctx.api.notifier, id, format, file.data)).catch((err: unknown) => {
    // The browser's body failed (it went away, or was too large): that, not the notifier, is why.
    const failure = file.failure();
    if (failure)
      return { ok: false as const, problem: { title: 'Upload interrupted', status: 400, code: 'upload_failed', detail: failure.message } };
    throw err;
  });
  if (!r.ok) return back({ ...state, ...(r.problem.code === 'upload_failed' ? { fileError: r.problem.detail } : {}), problem: r.problem });
  const { created, segment } = r.value;
  return ctx.redirect(segmentPath(segment.id), {
    kind: 'success',
    text: `${created ? 'Created' : 'Uploaded'} ${segment.id} version ${segment.version}: ${count(segment.size)} members from ${file.filename}.`,
  });
}

export const segmentsPage: ConsolePage = {
  id: 'segments',
  title: 'Segments',
  path: '/segments',
  register(router) {
    router.get('/segments', (ctx) => listPage(ctx));

    router.post('/segments/rule', async (ctx) => {
      const f = readRuleForm(ctx.request.form);
      if (f.id === '') return listPage(ctx, { kind: 'rule', form: f, problem: MISSING_ID });
      const r = await formCall(() => putRuleSegment(ctx.api.notifier, f.id, ruleOf(f)));
      if (!r.ok) return listPage(ctx, { kind: 'rule', form: f, problem: r.problem });
      return ctx.redirect(segmentPath(r.value.segment.id), {
        kind: 'success',
        text: `${r.value.created ? 'Created' : 'Saved'} rule segment ${r.value.segment.id} (version ${r.value.segment.version}, ${count(r.value.segment.size)} profiles match now).`,
      });
    });

    router.get('/segments/:id', async (ctx) => {
      const id = ctx.request.params[0]!;
      const s = await getSegment(ctx.api.notifier, id);
      return s ? segmentPage(ctx, s) : notFound(ctx, id);
    });

    router.post('/segments/:id/rule', async (ctx) => {
      const id = ctx.request.params[0]!;
      const f = readRuleForm(ctx.request.form, id);
      const r = await formCall(() => putRuleSegment(ctx.api.notifier, id, ruleOf(f)));
      if (!r.ok) {
        const s = await getSegment(ctx.api.notifier, id);
        return s ? segmentPage(ctx, s, { kind: 'rule', form: f, problem: r.problem }) : notFound(ctx, id);
      }
      return ctx.redirect(segmentPath(id), {
        kind: 'success',
        text: `Saved ${id} (version ${r.value.segment.version}, ${count(r.value.segment.size)} profiles match now).`,
      });
    });

    router.post('/segments/:id/delete', async (ctx) => {
      const id = ctx.request.params[0]!;
      if (ctx.request.form.get('confirm') !== 'on') {
        const s = await getSegment(ctx.api.notifier, id);
        return s ? segmentPage(ctx, s, { kind: 'delete', error: 'Tick the box to confirm the deletion.' }) : notFound(ctx, id);
      }
      const r = await formCall(() => deleteSegment(ctx.api.notifier, id));
      if (!r.ok) return ctx.redirect(segmentPath(id), { kind: 'error', text: r.problem.detail ?? r.problem.title });
      return ctx.redirect('/segments', { kind: 'success', text: `Deleted segment ${id}.` });
    });

    const upload = router.upload?.bind(router);
    if (upload) {
      upload(
        '/segments/upload',
        (ctx, file) =>
          receiveUpload(ctx, file, (ctx.request.form.get('segment_id') ?? '').trim(), (state) => listPage(ctx, { kind: 'upload', state })),
        { maxBytes: UPLOAD_MAX_BYTES },
      );
      upload(
        '/segments/:id/upload',
        (ctx, file) =>
          receiveUpload(ctx, file, ctx.request.params[0]!, async (state) => {
            const s = await getSegment(ctx.api.notifier, ctx.request.params[0]!);
            return s ? segmentPage(ctx, s, { kind: 'upload', state }) : listPage(ctx, { kind: 'upload', state });
          }),
        { maxBytes: UPLOAD_MAX_BYTES },
      );
    }
  },
};
