/**
 * The body of `PUT /api/v1/admin/templates/{template_id}`, validated into a template definition.
 * Every failure is a 400 `invalid_field` naming the field by its path (`variants.fr.push.body`).
 *
 * ```json
 * { "default_locale": "en", "description": "optional note",
 *   "variants": {
 *     "en": { "push":   { "title": "Order {{order_id}} shipped", "body": "Arrives {{eta}}" },
 *             "email":  { "subject": "…", "text": "…", "html": "<p>…</p>" },
 *             "sms":    { "body": "…" },
 *             "in_app": { "title": "…", "body": "…" } },
 *     "fr_CA": { … the same channels … } } }
 * ```
 *
 * Rules: the default locale's variant must exist; every variant has exactly the default
 * variant's channels (so choosing a locale never changes which channels a template can send);
 * required fields are per channel (render.ts `PART_FIELDS`); every text must parse (syntax.ts).
 * A JSON `null` counts as absent.
 */
import { invalidField } from '../../shared/errors.js';
import { TemplateSyntaxError } from './errors.js';
import { canonicalLocale } from './locale.js';
import { CHANNELS, PART_FIELDS, type Channel, type ChannelParts } from './render.js';
import { parseTemplate } from './syntax.js';

export interface TemplateDefinition {
  defaultLocale: string;
  description?: string;
  /** By canonical locale. */
  variants: Record<string, ChannelParts>;
}

export const MAX_VARIANTS = 100;
export const MAX_DESCRIPTION_LENGTH = 500;
export const MAX_TEXT_LENGTH = 8_000;
export const MAX_HTML_LENGTH = 100_000;

const TOP_FIELDS = new Set(['default_locale', 'description', 'variants']);

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function present(obj: Record<string, unknown>): string[] {
  return Object.keys(obj).filter((k) => obj[k] !== null && obj[k] !== undefined);
}

function parsePart(channel: Channel, value: unknown, path: string): Record<string, string> {
  if (!isObject(value)) throw invalidField(path, 'must be an object');
  const spec = PART_FIELDS[channel];
  const out: Record<string, string> = {};
  for (const key of present(value)) {
    if (!(key in spec)) throw invalidField(`${path}.${key}`, `unknown field; ${channel} takes ${Object.keys(spec).join(', ')}`);
  }
  for (const [field, need] of Object.entries(spec)) {
    const v = value[field];
    const fpath = `${path}.${field}`;
    if (v === null || v === undefined) {
      if (need === 'required') throw invalidField(fpath, 'is required');
      continue;
    }
    if (typeof v !== 'string') throw invalidField(fpath, 'must be a string');
    const max = field === 'html' ? MAX_HTML_LENGTH : MAX_TEXT_LENGTH;
    if (v.length > max) throw invalidField(fpath, `must be at most ${max} characters`);
    if (need === 'required' && v.trim() === '') throw invalidField(fpath, 'must not be empty');
    try {
      parseTemplate(v);
    } catch (err) {
      if (err instanceof TemplateSyntaxError) throw invalidField(fpath, err.message);
      throw err;
    }
    out[field] = v;
  }
  return out;
}

function parseVariant(value: unknown, path: string): ChannelParts {
  if (!isObject(value)) throw invalidField(path, 'must be an object of channel parts');
  const keys = present(value);
  for (const key of keys) {
    if (!(CHANNELS as readonly string[]).includes(key))
      throw invalidField(`${path}.${key}`, `unknown channel; one of ${CHANNELS.join(', ')}`);
  }
  if (keys.length === 0) throw invalidField(path, `needs at least one channel part (${CHANNELS.join(', ')})`);
  const parts: Record<string, Record<string, string>> = {};
  for (const channel of CHANNELS) {
    if (keys.includes(channel)) parts[channel] = parsePart(channel, value[channel], `${path}.${channel}`);
  }
  return parts;
}

/** Validates a PUT body. @throws PlatformError invalid_field naming the field */
export function parseDefinition(body: Record<string, unknown>): TemplateDefinition {
  for (const key of present(body)) if (!TOP_FIELDS.has(key)) throw invalidField(key, 'unknown field');

  const rawDefault = body['default_locale'];
  if (rawDefault === null || rawDefault === undefined) throw invalidField('default_locale', 'is required');
  if (typeof rawDefault !== 'string') throw invalidField('default_locale', 'must be a string');
  const defaultLocale = canonicalLocale(rawDefault);
  if (!defaultLocale) throw invalidField('default_locale', 'must be a locale: xx or xx_YY');

  const def: TemplateDefinition = { defaultLocale, variants: {} };
  const description = body['description'];
  if (description !== null && description !== undefined) {
    if (typeof description !== 'string') throw invalidField('description', 'must be a string');
    if (description.length > MAX_DESCRIPTION_LENGTH)
      throw invalidField('description', `must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
    def.description = description;
  }

  const variants = body['variants'];
  if (variants === null || variants === undefined) throw invalidField('variants', 'is required');
  if (!isObject(variants)) throw invalidField('variants', 'must be an object keyed by locale');
  const keys = present(variants);
  if (keys.length === 0) throw invalidField('variants', 'needs at least the default locale');
  if (keys.length > MAX_VARIANTS) throw invalidField('variants', `at most ${MAX_VARIANTS} locales`);
  const seenAs = new Map<string, string>();
  for (const key of keys) {
    const locale = canonicalLocale(key);
    if (!locale) throw invalidField(`variants.${key}`, 'is not a locale: xx or xx_YY');
    const other = seenAs.get(locale);
    if (other !== undefined) throw invalidField(`variants.${key}`, `is the same locale as variants.${other}`);
    seenAs.set(locale, key);
    def.variants[locale] = parseVariant(variants[key], `variants.${key}`);
  }
  const base = def.variants[defaultLocale];
  if (!base) throw invalidField('variants', `must include the default locale ${defaultLocale}`);
  const baseChannels = CHANNELS.filter((c) => base[c] !== undefined);
  for (const [locale, parts] of Object.entries(def.variants)) {
    const key = seenAs.get(locale)!;
    for (const c of CHANNELS) {
      const has = parts[c] !== undefined;
      if (has && !baseChannels.includes(c)) {
        throw invalidField(
          `variants.${key}.${c}`,
          `the default locale ${defaultLocale} has no ${c} part; every variant has the same channels`,
        );
      }
      if (!has && baseChannels.includes(c)) {
        throw invalidField(`variants.${key}.${c}`, `is required: every variant has the channels of the default locale ${defaultLocale}`);
      }
    }
  }
  return def;
}
