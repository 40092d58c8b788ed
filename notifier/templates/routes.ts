/**
 * The operator API for templates, under `/api/v1/admin/templates` (callers with role `admin` or
 * `service`):
 *
 * - `PUT /api/v1/admin/templates/{template_id}`: create (201) or replace (200) a version from a
 *   definition (definition.ts). Once a notification has used the version it is frozen: the same
 *   definition again is a harmless 200, a different one `409 template_version_immutable`.
 * - `GET /api/v1/admin/templates/{template_id}`: the version with every variant;
 *   `GET /api/v1/admin/templates/{template_id}.{locale}`: the same with only that variant.
 * - `GET /api/v1/admin/templates?name=&limit=&cursor=`: summaries in (name, version) order, with an
 *   opaque `next_cursor` while more remain.
 * - `POST /api/v1/admin/templates/{template_id}/render`: a preview, `{channel, locale?,
 *   template_data, items?, count?}` → what the channel would send; nothing is marked used.
 *   `items` (a list of template_data objects) previews a digest template (syntax.ts).
 */
import { PlatformError, invalidField } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions, type RequestContext } from '../../shared/http.js';
import type { Pool } from '../../shared/db.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { requireRole, type CallerResolver } from '../caller.js';
import { parseDefinition } from './definition.js';
import { TemplateNotFoundError } from './errors.js';
import { canonicalLocale } from './locale.js';
import { CHANNELS, type Channel } from './render.js';
import { listTemplates, loadTemplate, putTemplate, type StoredTemplate, type TemplateSummary } from './store.js';
import { parseTemplateId, parseVariantId } from './template-id.js';
import { renderTemplate } from './catalog.js';

/** Roles that may use the template API. */
export const TEMPLATE_ADMIN_ROLES: readonly string[] = Object.freeze(['admin', 'service']);

export const LIST_DEFAULT_LIMIT = 50;
export const LIST_MAX_LIMIT = 200;

const BASE = '/api/v1/admin/templates';

function summaryJson(t: Omit<TemplateSummary, 'locales' | 'channels'>): Record<string, unknown> {
  const out: Record<string, unknown> = {
    template_id: t.templateId,
    name: t.name,
    version: t.version,
    default_locale: t.defaultLocale,
  };
  if (t.description !== undefined) out['description'] = t.description;
  out['used'] = t.usedAt !== undefined;
  if (t.usedAt !== undefined) out['used_at'] = t.usedAt;
  out['created_at'] = t.createdAt;
  out['updated_at'] = t.updatedAt;
  return out;
}

function templateJson(t: StoredTemplate, onlyLocale?: string): Record<string, unknown> {
  const locales = Object.keys(t.variants).sort();
  const base = t.variants[t.defaultLocale] ?? {};
  const variants: Record<string, unknown> = {};
  for (const l of locales) if (onlyLocale === undefined || l === onlyLocale) variants[l] = t.variants[l];
  const out = summaryJson(t);
  if (onlyLocale !== undefined) out['variant_id'] = `${t.templateId}.${onlyLocale}`;
  out['locales'] = locales;
  out['channels'] = CHANNELS.filter((c) => base[c] !== undefined);
  out['variant_ids'] = locales.map((l) => `${t.templateId}.${l}`);
  out['variants'] = variants;
  return out;
}

function encodeCursor(name: string, version: number): string {
  return Buffer.from(JSON.stringify([name, version])).toString('base64url');
}

function decodeCursor(cursor: string): { name: string; version: number } {
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && Number.isInteger(v[1])) {
      return { name: v[0], version: v[1] as number };
    }
  } catch {
    // fall through
  }
  throw invalidField('cursor', 'is not a cursor this API returned');
}

function templateIdParam(raw: string): string {
  const id = parseTemplateId(raw);
  if (!id) throw invalidField('template_id', 'must be <name>_v<N>: a lower-case name (letters, digits, _ -) and a version from 1');
  return id.id;
}

export interface TemplateRouteOptions {
  /** Roles that may use the template API. Default {@link TEMPLATE_ADMIN_ROLES}. */
  roles?: readonly string[];
}

/** Registers the template API on `app`; every route needs a caller with one of `opts.roles` (default admin or service). */
export function registerTemplateRoutes(
  app: TemplatedApp,
  edge: EdgeOptions,
  pool: Pool,
  caller: CallerResolver,
  opts: TemplateRouteOptions = {},
): void {
  const roles = opts.roles ?? TEMPLATE_ADMIN_ROLES;
  const admin = async (ctx: RequestContext): Promise<void> => {
    requireRole(await caller.callerOf(ctx), roles);
  };

  route(
    app,
    'put',
    `${BASE}/:template_id`,
    async (ctx) => {
      await admin(ctx);
      const raw = ctx.params[0]!;
      const id = parseTemplateId(raw);
      if (!id) {
        if (parseVariantId(raw)) {
          throw invalidField('template_id', 'is a variant id; PUT the template <name>_v<N> with the variant under variants.<locale>');
        }
        templateIdParam(raw);
      }
      const def = parseDefinition(jsonBody(ctx));
      const { outcome, template } = await putTemplate(pool, id!, def);
      return { status: outcome === 'created' ? 201 : 200, body: templateJson(template) };
    },
    edge,
  );

  route(
    app,
    'get',
    `${BASE}/:template_id`,
    async (ctx) => {
      await admin(ctx);
      const raw = ctx.params[0]!;
      const variant = parseTemplateId(raw) ? undefined : parseVariantId(raw);
      const templateId = variant ? variant.template.id : templateIdParam(raw);
      const t = await loadTemplate(pool, templateId);
      if (!t) throw new PlatformError('not_found', { detail: `no template ${templateId}` });
      if (variant && t.variants[variant.locale] === undefined) {
        throw new PlatformError('not_found', { detail: `${templateId} has no ${variant.locale} variant` });
      }
      return { body: templateJson(t, variant?.locale) };
    },
    edge,
  );

  route(
    app,
    'get',
    BASE,
    async (ctx) => {
      await admin(ctx);
      const q = ctx.query;
      const name = q.get('name') ?? undefined;
      if (name !== undefined && !/^[a-z][a-z0-9_-]{0,119}$/.test(name)) throw invalidField('name', 'is not a template name');
      let limit = LIST_DEFAULT_LIMIT;
      const rawLimit = q.get('limit');
      if (rawLimit !== null) {
        limit = Number(rawLimit);
        if (!/^[0-9]+$/.test(rawLimit) || limit < 1 || limit > LIST_MAX_LIMIT) {
          throw invalidField('limit', `must be an integer from 1 to ${LIST_MAX_LIMIT}`);
        }
      }
      const rawCursor = q.get('cursor');
      const after = rawCursor === null || rawCursor === '' ? undefined : decodeCursor(rawCursor);
      const rows = await listTemplates(pool, { name, after, limit: limit + 1 });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      const body: Record<string, unknown> = {
        templates: page.map((t) => ({ ...summaryJson(t), locales: t.locales, channels: t.channels })),
      };
      if (rows.length > limit && last) body['next_cursor'] = encodeCursor(last.name, last.version);
      return { body };
    },
    edge,
  );

  route(
    app,
    'post',
    `${BASE}/:template_id/render`,
    async (ctx) => {
      await admin(ctx);
      const templateId = templateIdParam(ctx.params[0]!);
      const body = jsonBody(ctx);
      for (const k of Object.keys(body)) {
        if (!['channel', 'locale', 'template_data', 'items', 'count'].includes(k)) throw invalidField(k, 'unknown field');
      }
      const channel = body['channel'];
      if (typeof channel !== 'string' || !(CHANNELS as readonly string[]).includes(channel)) {
        throw invalidField('channel', `must be one of ${CHANNELS.join(', ')}`);
      }
      const locale = body['locale'] ?? undefined;
      if (locale !== undefined && (typeof locale !== 'string' || !canonicalLocale(locale))) {
        throw invalidField('locale', 'must be a locale: xx or xx_YY');
      }
      const data = body['template_data'] ?? {};
      if (data === null || typeof data !== 'object' || Array.isArray(data)) throw invalidField('template_data', 'must be an object');
      for (const [k, v] of Object.entries(data)) if (typeof v !== 'string') throw invalidField(`template_data.${k}`, 'must be a string');
      const items = body['items'];
      if (items !== undefined) {
        if (!Array.isArray(items) || items.length > 1000)
          throw invalidField('items', 'must be a list of at most 1000 template_data objects');
        items.forEach((item: unknown, i) => {
          if (item === null || typeof item !== 'object' || Array.isArray(item)) throw invalidField(`items[${i}]`, 'must be an object');
          for (const [k, v] of Object.entries(item)) if (typeof v !== 'string') throw invalidField(`items[${i}].${k}`, 'must be a string');
        });
      }
      const count = body['count'];
      if (count !== undefined && (items === undefined || !Number.isInteger(count) || (count as number) < (items as unknown[]).length)) {
        throw invalidField('count', 'must be an integer, at least the number of items, and only with items');
      }
      try {
        const r = await renderTemplate(pool, {
          templateId,
          locale: locale,
          channel: channel as Channel,
          data: data as Record<string, string>,
          ...(items !== undefined ? { items: items as Record<string, string>[] } : {}),
          ...(count !== undefined ? { count: count as number } : {}),
        });
        const out: Record<string, unknown> = { template_id: r.templateId, locale: r.locale, channel: r.channel };
        for (const k of ['title', 'subject', 'body', 'text', 'html', 'segments', 'encoding'] as const) {
          if (r[k] !== undefined) out[k] = r[k];
        }
        return { body: out };
      } catch (err) {
        if (err instanceof TemplateNotFoundError) throw new PlatformError('not_found', { detail: `no template ${templateId}` });
        throw err;
      }
    },
    edge,
  );
}
