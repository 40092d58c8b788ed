/**
 * Notification types (README, "Notification types, preferences and policies"): the catalogue an
 * operator configures in NOTIFIER_NOTIFICATION_TYPES, and how a request's type is known. Pure.
 *
 * A request's type is, in order: its `notification_type` field (which must name a configured
 * type, else 400); else the type whose `events` pattern matches its `event_type` most closely (an
 * exact name beats `domain.*`, which beats `*`); a request that matches nothing is refused (400
 * naming `notification_type`), so the default catalogue ends with a `general` type matching `*`.
 *
 * A type says:
 * - `events`: `domain.action`, `domain.*` or `*` patterns;
 * - `channels`: its default channels (a channel absent is off), used when neither the request nor
 *   the user's preferences name one (then push);
 * - `mandatory`: transactional by nature (security alerts): the user cannot turn it off, and caps,
 *   quiet hours and digests never apply, whatever the tier;
 * - `sms`: false when the type may never go out by SMS (forced for `marketing`);
 * - `caps`: per channel, at most `limit` sends in any sliding `window` (e.g. 5 per 1h);
 * - `digest`: `{window, template, max_items}`: sends are held for `window` and go out as one,
 *   rendered from `template` with the items (notifier/templates/syntax.ts, `{{#items}}`);
 * - `failover`: per failing channel, the channels a `high` or `transactional` delivery may fail
 *   over to, in order (policy/failover.ts picks the first that applies), e.g.
 *   `{"push": ["sms", "in_app"], "email": ["in_app"]}`; a channel not listed does not fail over;
 *   `false` turns failover off for the type. Default {@link DEFAULT_FAILOVER} (without `sms` for a
 *   type that may not use it).
 * Which of these apply at which tier is policy/table.ts.
 */
import { readFileSync } from 'node:fs';
import { duration } from '../../shared/config.js';
import { CHANNEL_NAMES, type ChannelName } from '../channels/channel.js';
import { parseTemplateId } from '../templates/template-id.js';

export interface CapRule {
  limit: number;
  windowMs: number;
}

export interface DigestRule {
  windowMs: number;
  template: string;
  /** Items rendered at most (the count covers all of them). */
  maxItems: number;
}

export interface NotificationType {
  name: string;
  events: readonly string[];
  /** The type's default channels. */
  channels: ReadonlySet<ChannelName>;
  mandatory: boolean;
  sms: boolean;
  caps: Readonly<Partial<Record<ChannelName, CapRule>>>;
  digest: DigestRule | undefined;
  /** Per failing channel, the channels it may fail over to, in order (policy/failover.ts). */
  failover: Readonly<Partial<Record<ChannelName, readonly ChannelName[]>>>;
}

/** Failover when a type does not say: push → sms, then in_app; e-mail → in_app; sms → in_app. */
export const DEFAULT_FAILOVER: Readonly<Partial<Record<ChannelName, readonly ChannelName[]>>> = {
  push: ['sms', 'in_app'],
  email: ['in_app'],
  sms: ['in_app'],
};

export interface TypeCatalog {
  readonly types: ReadonlyMap<string, NotificationType>;
  /** The type of a request: its `notification_type`, else by `event_type`; undefined when none. */
  typeOf(eventType: string, named?: string): NotificationType | undefined;
}

/** The default catalogue: the seed's four types and a fallback. */
export const DEFAULT_NOTIFICATION_TYPES = JSON.stringify({
  order_updates: { events: ['order.*', 'payment.*', 'shipping.*'], channels: ['push', 'email', 'in_app'] },
  // Seed 000: `normal` is "subject to rate caps and digesting", its example hold window 5 minutes.
  // social_digest_v1 comes with the notifier (migration 128).
  social_activity: {
    events: ['social.*'],
    channels: ['push', 'in_app'],
    caps: { push: { limit: 10, window: '1h' } },
    digest: { window: '5m', template: 'social_digest_v1', max_items: 50 },
  },
  security_alerts: { events: ['security.*', 'auth.*', 'account.*'], channels: ['push', 'email'], mandatory: true },
  marketing: {
    events: ['marketing.*', 'campaign.*'],
    channels: ['push', 'email', 'in_app'],
    sms: false,
    caps: { push: { limit: 5, window: '1h' }, email: { limit: 3, window: '24h' } },
  },
  general: { events: ['*'], channels: ['push'] },
});

const TYPE_NAME_RE = /^[a-z][a-z0-9_]{0,63}$/;
const EVENT_PATTERN_RE = /^(\*|[a-z][a-z0-9_-]*\.(\*|[a-z][a-z0-9_-]*))$/;
const KEYS = new Set(['events', 'channels', 'mandatory', 'sms', 'caps', 'digest', 'failover']);
/** The name a preferences document uses for quiet hours: no type may take it. */
export const RESERVED_TYPE_NAMES: readonly string[] = ['quiet_hours'];

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function channelOf(v: unknown, where: string): ChannelName {
  if (typeof v !== 'string' || !(CHANNEL_NAMES as readonly string[]).includes(v)) {
    throw new Error(`${where}: ${JSON.stringify(v)} is not a channel (${CHANNEL_NAMES.join(', ')})`);
  }
  return v as ChannelName;
}

function parseType(name: string, raw: unknown): NotificationType {
  if (!TYPE_NAME_RE.test(name) || RESERVED_TYPE_NAMES.includes(name)) {
    throw new Error(`type "${name}": names are a-z, 0-9 and _, starting with a letter (and not quiet_hours)`);
  }
  if (!isRecord(raw)) throw new Error(`${name}: must be an object`);
  for (const k of Object.keys(raw)) if (!KEYS.has(k)) throw new Error(`${name}.${k}: unknown field (${[...KEYS].join(', ')})`);

  const events = raw['events'] ?? [];
  if (!Array.isArray(events) || events.some((e) => typeof e !== 'string' || !EVENT_PATTERN_RE.test(e))) {
    throw new Error(`${name}.events: must be a list of "domain.action", "domain.*" or "*"`);
  }
  const channelList = raw['channels'] ?? ['push'];
  if (!Array.isArray(channelList)) throw new Error(`${name}.channels: must be a list of channels`);
  const channels = new Set(channelList.map((c, i) => channelOf(c, `${name}.channels[${i}]`)));

  const mandatory = raw['mandatory'] ?? false;
  if (typeof mandatory !== 'boolean') throw new Error(`${name}.mandatory: must be true or false`);
  const sms = raw['sms'] ?? name !== 'marketing';
  if (typeof sms !== 'boolean') throw new Error(`${name}.sms: must be true or false`);
  if (name === 'marketing' && sms) throw new Error('marketing.sms: SMS is never used for marketing');
  if (!sms && channels.has('sms')) throw new Error(`${name}.channels: sms is listed but ${name}.sms is false`);

  const caps: Partial<Record<ChannelName, CapRule>> = {};
  const rawCaps = raw['caps'] ?? {};
  if (!isRecord(rawCaps)) throw new Error(`${name}.caps: must be an object of channel → {limit, window}`);
  for (const [c, rule] of Object.entries(rawCaps)) {
    const channel = channelOf(c, `${name}.caps`);
    if (!isRecord(rule)) throw new Error(`${name}.caps.${c}: must be {limit, window}`);
    const limit = rule['limit'];
    if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > 100_000) {
      throw new Error(`${name}.caps.${c}.limit: must be an integer from 1 to 100000`);
    }
    const windowMs = durationField(rule['window'], `${name}.caps.${c}.window`, 1_000, 31 * 86_400_000);
    caps[channel] = { limit, windowMs };
  }

  let digest: DigestRule | undefined;
  if (raw['digest'] !== undefined) {
    const d = raw['digest'];
    if (!isRecord(d)) throw new Error(`${name}.digest: must be {window, template, max_items}`);
    for (const k of Object.keys(d)) {
      if (!['window', 'template', 'max_items'].includes(k)) throw new Error(`${name}.digest.${k}: unknown field`);
    }
    const template = d['template'];
    if (typeof template !== 'string' || !parseTemplateId(template)) {
      throw new Error(`${name}.digest.template: must be a template id <name>_v<N>`);
    }
    const maxItems = d['max_items'] ?? 50;
    if (typeof maxItems !== 'number' || !Number.isInteger(maxItems) || maxItems < 1 || maxItems > 1000) {
      throw new Error(`${name}.digest.max_items: must be an integer from 1 to 1000`);
    }
    digest = { windowMs: durationField(d['window'], `${name}.digest.window`, 1_000, 86_400_000), template, maxItems };
  }
  return { name, events, channels, mandatory, sms, caps, digest, failover: parseFailover(name, raw['failover'], sms) };
}

function parseFailover(name: string, raw: unknown, sms: boolean): NotificationType['failover'] {
  if (raw === undefined) {
    return Object.fromEntries(Object.entries(DEFAULT_FAILOVER).map(([from, to]) => [from, to.filter((c) => sms || c !== 'sms')]));
  }
  if (raw === false) return {};
  if (!isRecord(raw)) throw new Error(`${name}.failover: must be false or an object of channel → list of channels`);
  const out: Partial<Record<ChannelName, readonly ChannelName[]>> = {};
  for (const [from, list] of Object.entries(raw)) {
    const source = channelOf(from, `${name}.failover`);
    if (!Array.isArray(list)) throw new Error(`${name}.failover.${from}: must be a list of channels`);
    const to = list.map((c, i) => channelOf(c, `${name}.failover.${from}[${i}]`));
    if (to.includes(source)) throw new Error(`${name}.failover.${from}: a channel cannot fail over to itself`);
    if (new Set(to).size !== to.length) throw new Error(`${name}.failover.${from}: lists a channel twice`);
    if (!sms && to.includes('sms')) throw new Error(`${name}.failover.${from}: sms is listed but ${name}.sms is false`);
    out[source] = to;
  }
  return out;
}

function durationField(v: unknown, where: string, min: number, max: number): number {
  if (typeof v !== 'string') throw new Error(`${where}: must be a duration such as "5m" or "1h"`);
  let ms: number;
  try {
    ms = duration(v);
  } catch (err) {
    throw new Error(`${where}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (ms < min || ms > max) throw new Error(`${where}: must be between ${min / 1000}s and ${max / 86_400_000} days`);
  return ms;
}

/**
 * Parses NOTIFIER_NOTIFICATION_TYPES: a JSON object of type name → type, inline or (when the value
 * does not start with `{`) the path of a file holding it.
 * @throws Error naming the faulty field
 */
export function parseTypeCatalog(raw: string): TypeCatalog {
  const trimmed = raw.trim();
  // Inline JSON starts like JSON (an array is refused below as not an object); anything else is a path.
  const text = /^[[{"]/.test(trimmed) ? trimmed : readFileSync(trimmed, 'utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!isRecord(json) || Object.keys(json).length === 0) throw new Error('must be a JSON object with at least one type');
  const types = new Map<string, NotificationType>();
  const byPattern = new Map<string, NotificationType>();
  for (const [name, spec] of Object.entries(json)) {
    const t = parseType(name, spec);
    for (const e of t.events) {
      const other = byPattern.get(e);
      if (other) throw new Error(`${name}.events: "${e}" is already ${other.name}'s`);
      byPattern.set(e, t);
    }
    types.set(name, t);
  }
  if (!types.has('security_alerts') || !types.get('security_alerts')!.mandatory) {
    throw new Error('security_alerts: must exist and be mandatory (a user cannot turn security alerts off)');
  }
  return {
    types,
    typeOf(eventType, named) {
      if (named !== undefined) return types.get(named);
      const dot = eventType.indexOf('.');
      return byPattern.get(eventType) ?? (dot > 0 ? byPattern.get(`${eventType.slice(0, dot)}.*`) : undefined) ?? byPattern.get('*');
    },
  };
}

/**
 * The type of a stored notification: the one it was classified as, else (a row older than
 * migration 070, or a type an operator has since removed) by its event, else a stand-in of that
 * name with push as its channel, no caps or digest and the default failover, so a change of
 * catalogue never stalls work already accepted.
 */
export function storedType(catalog: TypeCatalog, stored: string | null, eventType: string): NotificationType {
  const known = (stored !== null ? catalog.types.get(stored) : undefined) ?? (stored === null ? catalog.typeOf(eventType) : undefined);
  if (known) return known;
  return {
    name: stored ?? 'general',
    events: [],
    channels: new Set(['push']),
    mandatory: false,
    sms: true,
    caps: {},
    digest: undefined,
    failover: DEFAULT_FAILOVER,
  };
}
