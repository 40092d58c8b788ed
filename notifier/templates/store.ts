/**
 * Templates in PostgreSQL (migration 050): the SQL, and nothing else.
 *
 * Immutability: `markUsed` sets `used_at`, and `put` locks the row (`FOR UPDATE`) before it looks
 * at `used_at`, so a version being marked used and being replaced at the same moment serialise on
 * that row: the replacement either lands before the first use or is refused after it.
 */
import { PlatformError } from '../../shared/errors.js';
import { withTransaction, type Pool, type PoolClient } from '../../shared/db.js';
import type { TemplateDefinition } from './definition.js';
import { CHANNELS, type ChannelParts } from './render.js';
import type { TemplateId } from './template-id.js';

/** A pool, or a client inside the caller's transaction. */
export type Queryable = Pool | PoolClient;

export interface StoredTemplate {
  templateId: string;
  name: string;
  version: number;
  defaultLocale: string;
  description: string | undefined;
  /** Epoch seconds. */
  createdAt: number;
  updatedAt: number;
  usedAt: number | undefined;
  /** By canonical locale. */
  variants: Record<string, ChannelParts>;
}

interface TemplateRow {
  template_id: string;
  name: string;
  version: number;
  default_locale: string;
  description: string | null;
  created_at: number;
  updated_at: number;
  used_at: number | null;
}

const COLUMNS = `template_id, name, version, default_locale, description,
  extract(epoch FROM created_at)::float8 AS created_at,
  extract(epoch FROM updated_at)::float8 AS updated_at,
  extract(epoch FROM used_at)::float8 AS used_at`;

function toStored(row: TemplateRow, variants: Record<string, ChannelParts>): StoredTemplate {
  return {
    templateId: row.template_id,
    name: row.name,
    version: row.version,
    defaultLocale: row.default_locale,
    description: row.description ?? undefined,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    usedAt: row.used_at ?? undefined,
    variants,
  };
}

async function variantsOf(db: Queryable, templateId: string): Promise<Record<string, ChannelParts>> {
  const { rows } = await db.query<{ locale: string; parts: ChannelParts }>(
    'SELECT locale, parts FROM template_variants WHERE template_id = $1 ORDER BY locale',
    [templateId],
  );
  const out: Record<string, ChannelParts> = {};
  for (const r of rows) out[r.locale] = r.parts;
  return out;
}

/** The template with all its variants, or undefined. */
export async function loadTemplate(db: Queryable, templateId: string): Promise<StoredTemplate | undefined> {
  // One round trip: the row and its variants aggregated.
  const { rows } = await db.query<TemplateRow & { variants: Record<string, ChannelParts> | null }>(
    `SELECT ${COLUMNS},
       (SELECT jsonb_object_agg(v.locale, v.parts) FROM template_variants v WHERE v.template_id = t.template_id) AS variants
     FROM templates t WHERE template_id = $1`,
    [templateId],
  );
  const row = rows[0];
  return row ? toStored(row, row.variants ?? {}) : undefined;
}

export async function templateRowExists(db: Queryable, templateId: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM templates WHERE template_id = $1', [templateId]);
  return (rowCount ?? 0) > 0;
}

/** Sets `used_at` on first use; true when the template exists. */
export async function markUsed(db: Queryable, templateId: string): Promise<boolean> {
  const { rowCount } = await db.query(`UPDATE templates SET used_at = now() WHERE template_id = $1 AND used_at IS NULL`, [templateId]);
  if ((rowCount ?? 0) > 0) return true;
  return templateRowExists(db, templateId);
}

/** JSON with object keys sorted, so two definitions compare by content. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj)
      .filter((k) => obj[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function sameDefinition(stored: StoredTemplate, def: TemplateDefinition): boolean {
  return (
    stored.defaultLocale === def.defaultLocale &&
    (stored.description ?? null) === (def.description ?? null) &&
    canonicalJson(stored.variants) === canonicalJson(def.variants)
  );
}

async function insertVariants(client: PoolClient, templateId: string, def: TemplateDefinition): Promise<void> {
  const locales = Object.keys(def.variants);
  await client.query(
    `INSERT INTO template_variants (template_id, locale, parts)
     SELECT $1, l, p FROM unnest($2::text[], $3::jsonb[]) AS x(l, p)`,
    [templateId, locales, locales.map((l) => JSON.stringify(def.variants[l]))],
  );
}

export type PutOutcome = 'created' | 'replaced' | 'unchanged';

/**
 * Creates or replaces a template version. A used version is never changed: the same definition
 * again is `unchanged` (a retried PUT is harmless), a different one is refused.
 * @throws PlatformError template_version_immutable
 */
export async function putTemplate(
  pool: Pool,
  id: TemplateId,
  def: TemplateDefinition,
): Promise<{ outcome: PutOutcome; template: StoredTemplate }> {
  return withTransaction(pool, async (client) => {
    const inserted = await client.query<TemplateRow>(
      `INSERT INTO templates (template_id, name, version, default_locale, description)
       VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (template_id) DO NOTHING
       RETURNING ${COLUMNS}`,
      [id.id, id.name, id.version, def.defaultLocale, def.description ?? null],
    );
    if (inserted.rows[0]) {
      await insertVariants(client, id.id, def);
      return { outcome: 'created' as const, template: toStored(inserted.rows[0], def.variants) };
    }
    const locked = await client.query<TemplateRow>(`SELECT ${COLUMNS} FROM templates WHERE template_id = $1 FOR UPDATE`, [id.id]);
    const row = locked.rows[0]!;
    const current = toStored(row, await variantsOf(client, id.id));
    if (sameDefinition(current, def)) return { outcome: 'unchanged' as const, template: current };
    if (current.usedAt !== undefined) {
      throw new PlatformError('template_version_immutable', {
        detail: `${id.id} has been used and can no longer change; create ${id.name}_v${id.version + 1} instead`,
      });
    }
    const updated = await client.query<TemplateRow>(
      `UPDATE templates SET default_locale = $2, description = $3, updated_at = now()
       WHERE template_id = $1 RETURNING ${COLUMNS}`,
      [id.id, def.defaultLocale, def.description ?? null],
    );
    await client.query('DELETE FROM template_variants WHERE template_id = $1', [id.id]);
    await insertVariants(client, id.id, def);
    return { outcome: 'replaced' as const, template: toStored(updated.rows[0]!, def.variants) };
  });
}

export interface TemplateSummary {
  templateId: string;
  name: string;
  version: number;
  defaultLocale: string;
  description: string | undefined;
  locales: string[];
  channels: string[];
  createdAt: number;
  updatedAt: number;
  usedAt: number | undefined;
}

/** Templates in (name, version) order after `after`, at most `limit`, optionally of one name. */
export async function listTemplates(
  db: Queryable,
  opts: { name?: string; after?: { name: string; version: number }; limit: number },
): Promise<TemplateSummary[]> {
  const { rows } = await db.query<TemplateRow & { locales: string[]; channels: string[] | null }>(
    `SELECT ${COLUMNS},
       ARRAY(SELECT v.locale FROM template_variants v WHERE v.template_id = t.template_id ORDER BY v.locale) AS locales,
       ARRAY(SELECT jsonb_object_keys(d.parts) FROM template_variants d
             WHERE d.template_id = t.template_id AND d.locale = t.default_locale) AS channels
     FROM templates t
     WHERE ($1::text IS NULL OR name = $1)
       AND ($2::text IS NULL OR (name, version) > ($2::text, $3::integer))
     ORDER BY name, version
     LIMIT $4`,
    [opts.name ?? null, opts.after?.name ?? null, opts.after?.version ?? null, opts.limit],
  );
  return rows.map((r) => {
    const { variants: _none, ...summary } = toStored(r, {});
    const channels = r.channels ?? [];
    return { ...summary, locales: r.locales, channels: CHANNELS.filter((c) => channels.includes(c)) };
  });
}
