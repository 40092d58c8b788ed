/**
 * The template catalogue as the notifier uses it.
 *
 * - {@link renderTemplate}: one channel's output for a recipient. The variant is chosen by locale,
 *   `xx_YY` → `xx` → the template's default locale, only because a variant is missing; once a
 *   variant is chosen, any failure is a {@link RenderError} and no other locale is tried.
 * - {@link templateExists} and {@link markTemplateUsed} for ingestion: a used version can no longer
 *   change (the admin API answers 409), so what was accepted is what gets rendered.
 *
 * A used version is immutable, so it is cached in process once seen (per pool, bounded); an unused
 * one is read from PostgreSQL on every render, so an edit shows at once. Only calls made with a
 * pool use the cache: a client may be inside a transaction that has not committed.
 */
import pg from 'pg';
import { LRUCache } from 'lru-cache';
import { RenderError, TemplateNotFoundError, TemplateSyntaxError } from './errors.js';
import { localeChain } from './locale.js';
import { compileParts, renderParts, type Channel, type ChannelParts, type CompiledParts, type RenderedContent } from './render.js';
import { loadTemplate, markUsed, templateRowExists, type Queryable } from './store.js';
import type { TemplateData } from './syntax.js';
import { parseTemplateId } from './template-id.js';

export interface RenderRequest {
  /** `<name>_v<N>`. */
  templateId: string;
  /** The recipient's locale (the request's, else the profile's); any form `canonicalLocale` takes. Unset: the default. */
  locale?: string | undefined;
  channel: Channel;
  /**
   * The request's `template_data`. In a digest render, the top level reads it overlaid by the last
   * item's `template_data` and then by `count`; `{{#items}}` never reads it.
   */
  data: TemplateData;
  /**
   * Set for a digest render: the held notifications' `template_data`, oldest first (the last is
   * the most recent), for `{{#items}}`. Unset, a template using `{{#items}}` fails with
   * `missing_variable` (`variable: 'items'`).
   */
  items?: readonly TemplateData[] | undefined;
  /**
   * A digest render's `{{count}}`: how many notifications it stands for, which may exceed the
   * items given; at least `items.length`, its default. Only with `items`.
   */
  count?: number | undefined;
}

/** One channel's output, with the template and the locale variant actually used. */
export interface Rendered extends RenderedContent {
  templateId: string;
  /** The variant used (canonical), e.g. `fr` when `fr_CA` was asked for and is missing. */
  locale: string;
}

interface CompiledTemplate {
  templateId: string;
  defaultLocale: string;
  used: boolean;
  sources: Record<string, ChannelParts>;
  compiled: Map<string, CompiledParts | RenderError>;
}

const CACHE_SIZE = 1_000;
const caches = new WeakMap<object, { templates: LRUCache<string, CompiledTemplate>; used: LRUCache<string, true> }>();

function cacheOf(db: Queryable): { templates: LRUCache<string, CompiledTemplate>; used: LRUCache<string, true> } | undefined {
  if (!(db instanceof pg.Pool)) return undefined;
  let c = caches.get(db);
  if (!c) {
    c = { templates: new LRUCache({ max: CACHE_SIZE }), used: new LRUCache({ max: CACHE_SIZE * 10 }) };
    caches.set(db, c);
  }
  return c;
}

async function compiledTemplate(db: Queryable, templateId: string): Promise<CompiledTemplate> {
  const cache = cacheOf(db);
  const hit = cache?.templates.get(templateId);
  if (hit) return hit;
  if (!parseTemplateId(templateId)) throw new TemplateNotFoundError(templateId);
  const stored = await loadTemplate(db, templateId);
  if (!stored) throw new TemplateNotFoundError(templateId);
  const t: CompiledTemplate = {
    templateId,
    defaultLocale: stored.defaultLocale,
    used: stored.usedAt !== undefined,
    sources: stored.variants,
    compiled: new Map(),
  };
  if (t.used && cache) {
    cache.templates.set(templateId, t);
    cache.used.set(templateId, true);
  }
  return t;
}

function variantOf(t: CompiledTemplate, locale: string): CompiledParts {
  let c = t.compiled.get(locale);
  if (!c) {
    try {
      c = compileParts(t.sources[locale]!);
    } catch (err) {
      if (!(err instanceof TemplateSyntaxError)) throw err;
      c = new RenderError('template_invalid', `the stored ${locale} variant does not parse: ${err.message}`, {
        templateId: t.templateId,
        locale,
      });
    }
    t.compiled.set(locale, c);
  }
  if (c instanceof RenderError) throw c;
  return c;
}

/**
 * Renders one channel of a template for one recipient, or, with `items`, one digest.
 * @throws TemplateNotFoundError when no such version exists
 * @throws RenderError when the chosen variant cannot be rendered with `data` (never retried in another locale)
 * @throws RangeError when `count` is given without `items`, or is less than `items.length` (a caller's bug)
 */
export async function renderTemplate(db: Queryable, req: RenderRequest): Promise<Rendered> {
  if (req.items === undefined && req.count !== undefined) {
    throw new RangeError('count is only for a digest render: pass items with it');
  }
  const t = await compiledTemplate(db, req.templateId);
  const locale = localeChain(req.locale, t.defaultLocale).find((l) => t.sources[l] !== undefined);
  if (locale === undefined) {
    throw new RenderError('template_invalid', `the template has no ${t.defaultLocale} (default) variant`, { templateId: t.templateId });
  }
  try {
    const digest = req.items === undefined ? undefined : { items: req.items, count: req.count };
    return { ...renderParts(variantOf(t, locale), req.channel, req.data, digest), templateId: t.templateId, locale };
  } catch (err) {
    if (err instanceof RenderError && err.extra?.['template_id'] === undefined) {
      throw new RenderError(err.reason, err.detail ?? err.message, {
        variable: err.variable,
        templateId: t.templateId,
        locale,
        channel: req.channel,
      });
    }
    throw err;
  }
}

/** True when `templateId` names an existing template version. */
export async function templateExists(db: Queryable, templateId: string): Promise<boolean> {
  if (!parseTemplateId(templateId)) return false;
  if (cacheOf(db)?.used.has(templateId)) return true;
  return templateRowExists(db, templateId);
}

/**
 * Records that a notification uses this version, which freezes it. Idempotent; pass the
 * ingestion transaction's client to make the mark part of it.
 * @throws TemplateNotFoundError when no such version exists
 */
export async function markTemplateUsed(db: Queryable, templateId: string): Promise<void> {
  const cache = cacheOf(db);
  if (cache?.used.has(templateId)) return;
  if (!parseTemplateId(templateId) || !(await markUsed(db, templateId))) throw new TemplateNotFoundError(templateId);
  cache?.used.set(templateId, true);
}
