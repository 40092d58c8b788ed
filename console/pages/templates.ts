/**
 * Templates: the list (by name, then version), one version with its locale variants and the other
 * versions of the same name, and a rendered preview per channel with sample data (the notifier's
 * render endpoint: exactly what that channel would send, nothing marked used). E-mail HTML is shown
 * as its source, never rendered into the console's page.
 */
import { html, href, type Html } from '../html.js';
import { details, field, select, table, textarea } from '../forms.js';
import type { ApiProblem } from '../api/problem.js';
import { getTemplate, listTemplates, renderTemplate, type Rendered, type Template, type TemplateSummary } from '../api/notifier-ops.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { formCall, timeEl } from './ops-format.js';

function templateHref(id: string): string {
  return href(`/templates/${encodeURIComponent(id)}`);
}

async function listPage(ctx: PageContext): Promise<PageResult> {
  const name = (ctx.request.query.get('name') ?? '').trim();
  const cursor = ctx.request.query.get('cursor') ?? undefined;
  const r = await formCall(() => listTemplates(ctx.api.notifier, { name: name || undefined, cursor, limit: 50 }));
  const rows = r.ok ? r.value.templates : [];
  const body = html`<form method="get" action="/templates" class="inline" role="search">
      ${field({ name: 'name', label: 'Name', value: name, type: 'search', hint: 'The template name without _v<N>.', problem: r.ok ? undefined : r.problem })}
      <p><button type="submit">Search</button></p>
    </form>
    ${table<TemplateSummary>({
      caption: name ? `Versions of ${name}` : 'Templates, by name and version',
      id: 'templates',
      empty: name ? `No template is named ${name}.` : 'No template has been stored yet.',
      rows,
      columns: [
        {
          header: 'Template',
          rowHeader: true,
          cell: (t) => html`<a href="${templateHref(t.template_id)}"><code>${t.template_id}</code></a>`,
        },
        { header: 'Version', numeric: true, cell: (t) => t.version },
        { header: 'Locales', cell: (t) => t.locales.join(', ') },
        { header: 'Channels', cell: (t) => t.channels.join(', ') },
        { header: 'Used', cell: (t) => (t.used ? html`<span class="badge">used: immutable</span>` : 'not yet') },
        { header: 'Updated', cell: (t) => timeEl(t.updated_at) },
      ],
    })}
    ${r.ok && r.value.next_cursor && html`<p><a href="${href('/templates', { name, cursor: r.value.next_cursor })}" rel="next">Next page</a></p>`}`;
  return ctx.render({ title: 'Templates', body });
}

function variantSection(locale: string, channels: Record<string, Record<string, string>>, isDefault: boolean): Html {
  return html`<section aria-labelledby="v-${locale}">
    <h3 id="v-${locale}">${locale}${isDefault ? ' (default)' : ''}</h3>
    ${table<[string, string, string]>({
      caption: `The ${locale} variant, as written`,
      rows: Object.entries(channels).flatMap(([ch, parts]) =>
        Object.entries(parts).map(([part, text]) => [ch, part, text] as [string, string, string]),
      ),
      columns: [
        { header: 'Channel', rowHeader: true, cell: (r) => r[0] },
        { header: 'Part', cell: (r) => r[1] },
        { header: 'Text', cell: (r) => html`<pre class="preview">${r[2]}</pre>` },
      ],
    })}
  </section>`;
}

/** `key=value` lines into template data; errors name the line. */
export function parseTemplateData(raw: string): { data?: Record<string, string>; error?: string } {
  const data: Record<string, string> = {};
  const lines = raw.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') continue;
    const eq = line.indexOf('=');
    if (eq <= 0) return { error: `line ${i + 1}: write name=value` };
    data[line.slice(0, eq).trim()] = line.slice(eq + 1);
  }
  return { data };
}

const PREVIEW_PARTS = ['title', 'subject', 'body', 'text', 'html'] as const;

function previewSection(channel: string, r: { ok: true; value: Rendered } | { ok: false; problem: ApiProblem }): Html {
  if (!r.ok)
    return html`<section class="rendered" aria-labelledby="p-${channel}" data-channel="${channel}">
      <h3 id="p-${channel}">${channel}</h3>
      <div class="problem" role="alert">
        <p><strong>${r.problem.title}</strong> (${r.problem.code})</p>
        ${r.problem.detail !== undefined && html`<p>${r.problem.detail}</p>`}
      </div>
    </section>`;
  const v = r.value;
  const locale = typeof v.locale === 'string' ? v.locale : '';
  const pairs: (readonly [string, Html | string])[] = [];
  for (const p of PREVIEW_PARTS)
    if (v[p] !== undefined) pairs.push([p === 'html' ? 'html (source)' : p, html`<pre class="preview">${String(v[p])}</pre>`]);
  if (v.segments !== undefined) pairs.push(['segments', `${String(v.segments)} (${String(v.encoding ?? '')})`]);
  return html`<section class="rendered" aria-labelledby="p-${channel}" data-channel="${channel}">
    <h3 id="p-${channel}">${channel}${locale !== '' && html` <span class="code">(${locale})</span>`}</h3>
    ${details(pairs)}
  </section>`;
}

async function templatePage(
  ctx: PageContext,
  o: { preview?: Html; problem?: ApiProblem; locale?: string; data?: string; errors?: Record<string, string>; status?: number } = {},
): Promise<PageResult> {
  const id = ctx.request.params[0]!;
  const t: Template | undefined = await getTemplate(ctx.api.notifier, id);
  if (!t)
    return ctx.render({
      title: 'Template',
      status: 404,
      body: html`<p>No template has the id ${id}. <a href="/templates">All templates</a></p>`,
    });
  const versions = await formCall(() => listTemplates(ctx.api.notifier, { name: t.name, limit: 200 }));
  const locales = Object.keys(t.variants);
  const body = html`<p><a href="/templates">All templates</a></p>
    ${details([
      ['Name', t.name],
      ['Version', t.version],
      ['Default locale', t.default_locale],
      ['Description', t.description],
      ['Used', t.used ? 'yes: this version can no longer change (store a new _v<N+1>)' : 'not yet: it can still be replaced'],
      ['Updated', timeEl(t.updated_at)],
    ])}
    ${
      versions.ok &&
      versions.value.templates.length > 1 &&
      html`<h2>Versions</h2>
        <ul>
          ${versions.value.templates.map((v) =>
            v.template_id === t.template_id
              ? html`<li><strong>${v.template_id}</strong> (this one)</li>`
              : html`<li><a href="${templateHref(v.template_id)}">${v.template_id}</a></li>`,
          )}
        </ul>`
    }
    <h2>Locale variants</h2>
    ${locales.map((l) => variantSection(l, t.variants[l]!, l === t.default_locale))}
    <h2 id="preview-h">Preview</h2>
    <form method="post" action="${templateHref(t.template_id)}/preview" aria-labelledby="preview-h">
      ${ctx.csrfField()}
      ${select({ name: 'locale', label: 'Locale', value: o.locale ?? t.default_locale, options: locales.map((l) => ({ value: l, label: l })) })}
      ${textarea({
        name: 'template_data',
        label: 'Sample data',
        value: o.data ?? '',
        rows: 5,
        hint: 'One name=value per line, e.g. order_id=A-1042',
        errors: o.errors,
        problem: o.problem,
      })}
      <p><button type="submit">Render every channel</button></p>
    </form>
    ${o.preview && html`<div id="previews" role="region" aria-label="Rendered previews">${o.preview}</div>`}`;
  return ctx.render({ title: `Template ${t.template_id}`, body, status: o.status, problem: o.problem });
}

async function previewPost(ctx: PageContext): Promise<PageResult> {
  const id = ctx.request.params[0]!;
  const locale = ctx.request.form.get('locale') ?? undefined;
  const raw = ctx.request.form.get('template_data') ?? '';
  const parsed = parseTemplateData(raw);
  if (!parsed.data) return templatePage(ctx, { locale, data: raw, errors: { template_data: parsed.error! }, status: 422 });
  const t = await getTemplate(ctx.api.notifier, id);
  if (!t) return templatePage(ctx);
  const sections: Html[] = [];
  for (const channel of t.channels) {
    const r = await formCall(() =>
      renderTemplate(ctx.api.notifier, id, { channel, ...(locale ? { locale } : {}), template_data: parsed.data! }),
    );
    sections.push(previewSection(channel, r));
  }
  return templatePage(ctx, { locale, data: raw, preview: html`${sections}` });
}

export const templatesPage: ConsolePage = {
  id: 'templates',
  title: 'Templates',
  path: '/templates',
  register(r) {
    r.get('/templates', listPage);
    r.get('/templates/:id', (ctx) => templatePage(ctx));
    r.post('/templates/:id/preview', previewPost);
  },
};
