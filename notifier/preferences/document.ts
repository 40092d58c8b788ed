/**
 * A user's preferences document and the validation of `PATCH /api/v1/users/{user_id}/preferences`
 * (README, "Notification types, preferences and policies"). Pure.
 *
 * The JSON shape is the seed's: each configured notification type (policy/types.ts) maps channels
 * to booleans, and `quiet_hours` holds `start` and `end` (`HH:MM`, the user's local time, read in
 * the profile's time zone):
 *
 *     {"marketing": {"push": false, "email": true}, "quiet_hours": {"start": "22:00", "end": "07:00"}}
 *
 * PATCH is a partial update merged into what is stored: a type's channels are merged one by one,
 * `null` for a channel forgets the user's choice (the type's default applies again), `null` for
 * `quiet_hours` removes them. Refused with 400 naming the field: a type that is not configured, a
 * channel that does not exist, a value that is not a boolean, `HH:MM` out of range, start = end,
 * turning a `mandatory` type (security alerts) off, and turning SMS on for a type that never uses
 * it (marketing). The answer is the whole document as stored after the merge (what the user set,
 * not the defaults).
 */
import { invalidField } from '../../shared/errors.js';
import { CHANNEL_NAMES, type ChannelName } from '../channels/channel.js';
import { parseClockTime } from '../policy/quiet-hours.js';
import type { TypeCatalog } from '../policy/types.js';

export type ChannelChoices = Partial<Record<ChannelName, boolean>>;

export interface QuietHoursSetting {
  start: string;
  end: string;
}

/** What is stored (user_preferences.prefs). */
export interface PreferenceDoc {
  types: Record<string, ChannelChoices>;
  quiet_hours?: QuietHoursSetting;
}

/** A validated PATCH body: `null` removes. */
export interface PreferencePatch {
  types: Record<string, Partial<Record<ChannelName, boolean | null>>>;
  quietHours?: QuietHoursSetting | null;
}

export const EMPTY_PREFERENCES: PreferenceDoc = { types: {} };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Validates a PATCH body. @throws PlatformError invalid_field naming the field */
export function parsePreferencePatch(body: unknown, catalog: TypeCatalog): PreferencePatch {
  if (!isRecord(body)) throw invalidField('body', 'must be a JSON object');
  const patch: PreferencePatch = { types: {} };
  for (const [key, value] of Object.entries(body)) {
    if (key === 'quiet_hours') {
      patch.quietHours = value === null ? null : parseQuietHours(value);
      continue;
    }
    const type = catalog.types.get(key);
    if (!type) {
      throw invalidField(key, `is not a notification type; the types are ${[...catalog.types.keys()].join(', ')} (and quiet_hours)`);
    }
    if (!isRecord(value)) throw invalidField(key, 'must be an object of channel → true, false or null');
    const choices: Partial<Record<ChannelName, boolean | null>> = {};
    for (const [channel, on] of Object.entries(value)) {
      const field = `${key}.${channel}`;
      if (!(CHANNEL_NAMES as readonly string[]).includes(channel)) {
        throw invalidField(field, `is not a channel; the channels are ${CHANNEL_NAMES.join(', ')}`);
      }
      if (on !== null && typeof on !== 'boolean') throw invalidField(field, 'must be true, false or null');
      if (type.mandatory && on === false) throw invalidField(field, `${key} cannot be turned off`);
      if (channel === 'sms' && !type.sms && on === true) throw invalidField(field, `${key} is never sent by SMS`);
      choices[channel as ChannelName] = on;
    }
    patch.types[key] = choices;
  }
  return patch;
}

function parseQuietHours(v: unknown): QuietHoursSetting {
  if (!isRecord(v)) throw invalidField('quiet_hours', 'must be {"start": "HH:MM", "end": "HH:MM"} or null');
  for (const k of Object.keys(v)) if (k !== 'start' && k !== 'end') throw invalidField(`quiet_hours.${k}`, 'unknown field');
  const start = v['start'];
  const end = v['end'];
  if (typeof start !== 'string' || parseClockTime(start) === undefined) {
    throw invalidField('quiet_hours.start', 'must be HH:MM, 00:00 to 23:59');
  }
  if (typeof end !== 'string' || parseClockTime(end) === undefined) throw invalidField('quiet_hours.end', 'must be HH:MM, 00:00 to 23:59');
  if (start === end) throw invalidField('quiet_hours.end', 'must differ from quiet_hours.start');
  return { start, end };
}

/** The document after a patch. */
export function applyPreferencePatch(doc: PreferenceDoc, patch: PreferencePatch): PreferenceDoc {
  const types: Record<string, ChannelChoices> = {};
  for (const [t, c] of Object.entries(doc.types)) types[t] = { ...c };
  for (const [t, changes] of Object.entries(patch.types)) {
    const merged: ChannelChoices = { ...types[t] };
    for (const [channel, on] of Object.entries(changes) as [ChannelName, boolean | null][]) {
      if (on === null) delete merged[channel];
      else merged[channel] = on;
    }
    if (Object.keys(merged).length > 0) types[t] = merged;
    else delete types[t];
  }
  const out: PreferenceDoc = { types };
  const quiet = patch.quietHours === undefined ? doc.quiet_hours : patch.quietHours;
  if (quiet) out.quiet_hours = quiet;
  return out;
}

/** The API's JSON: the types at the top level, beside `quiet_hours`. */
export function preferencesJson(doc: PreferenceDoc): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const t of Object.keys(doc.types).sort()) out[t] = doc.types[t];
  if (doc.quiet_hours) out['quiet_hours'] = doc.quiet_hours;
  return out;
}

/**
 * A stored document read back (it was validated on the way in; anything unexpected, e.g. a type
 * an operator has since removed, is kept as stored and simply never consulted).
 */
export function storedPreferences(raw: unknown): PreferenceDoc {
  if (!isRecord(raw)) return EMPTY_PREFERENCES;
  const types = isRecord(raw['types']) ? (raw['types'] as Record<string, ChannelChoices>) : {};
  const q = raw['quiet_hours'];
  const doc: PreferenceDoc = { types };
  if (isRecord(q) && typeof q['start'] === 'string' && typeof q['end'] === 'string') doc.quiet_hours = { start: q['start'], end: q['end'] };
  return doc;
}
