/**
 * A rule segment's rule: equality filters over recipient profiles, all of which must match.
 * `locale` and `timezone` are compared in the canonical forms profiles are stored in
 * (profiles/profile.ts: `fr-ca` is `fr_CA`, `europe/paris` is `Europe/Paris`), so a rule is
 * canonicalised the same way when it is written; `locale: "fr"` matches `fr` only, not `fr_CA`.
 * `tags`: the profile has every one of them.
 */
import { invalidField } from '../../shared/errors.js';
import { canonicalTimeZone } from '../profiles/profile.js';
import { parseTags } from '../profiles/tags.js';
import { canonicalLocale } from '../templates/locale.js';

export interface SegmentRule {
  locale?: string;
  timezone?: string;
  /** Sorted, distinct, at least one when present. */
  tags?: string[];
}

const KEYS = ['locale', 'timezone', 'tags'] as const;

/** Validates `rule` into its canonical form. @throws PlatformError invalid_field naming `rule.<key>` */
export function parseRule(raw: unknown): SegmentRule {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw invalidField('rule', 'must be an object');
  const body = raw as Record<string, unknown>;
  for (const k of Object.keys(body)) {
    if (!(KEYS as readonly string[]).includes(k)) throw invalidField(`rule.${k}`, `unknown key; a rule has ${KEYS.join(', ')}`);
  }
  const out: SegmentRule = {};
  if (body['locale'] !== undefined) {
    const c = typeof body['locale'] === 'string' ? canonicalLocale(body['locale']) : undefined;
    if (c === undefined) throw invalidField('rule.locale', 'must be a locale: xx or xx_YY, e.g. fr or fr_CA');
    out.locale = c;
  }
  if (body['timezone'] !== undefined) {
    const c = typeof body['timezone'] === 'string' ? canonicalTimeZone(body['timezone']) : undefined;
    if (c === undefined) throw invalidField('rule.timezone', 'must be an IANA time zone, e.g. Europe/Paris');
    out.timezone = c;
  }
  if (body['tags'] !== undefined) {
    const tags = parseTags(body['tags'], 'rule.tags');
    if (tags.length === 0) throw invalidField('rule.tags', 'must name at least one tag (leave it out to match any)');
    out.tags = tags;
  }
  if (Object.keys(out).length === 0) throw invalidField('rule', `must have at least one of ${KEYS.join(', ')}`);
  return out;
}

/** True when two canonical rules select the same profiles. */
export function sameRule(a: SegmentRule, b: SegmentRule): boolean {
  return a.locale === b.locale && a.timezone === b.timezone && (a.tags ?? []).join('\n') === (b.tags ?? []).join('\n');
}

/**
 * The SQL condition over `user_profiles` for a rule, its parameters numbered from `first`. Pure:
 * the store appends it to its own statements.
 */
export function ruleCondition(rule: SegmentRule, first: number): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  const next = (v: unknown): string => {
    params.push(v);
    return `$${first + params.length - 1}`;
  };
  if (rule.locale !== undefined) parts.push(`locale = ${next(rule.locale)}`);
  if (rule.timezone !== undefined) parts.push(`timezone = ${next(rule.timezone)}`);
  if (rule.tags !== undefined && rule.tags.length > 0) parts.push(`tags @> ${next(rule.tags)}::text[]`);
  return { sql: parts.length > 0 ? parts.join(' AND ') : 'true', params };
}
