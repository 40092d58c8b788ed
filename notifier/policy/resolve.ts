/**
 * Which channels a notification goes out on, and what becomes of each (README, "Notification
 * types, preferences and policies"). Pure; used by the router (workers/route.ts) and the status
 * view.
 *
 * Candidates: the channels the request names; else the channels the user turned on for the type,
 * with the type's defaults that the user did not turn off; else push. Only channels the policy
 * table allows (policy/table.ts) are ever candidates. Then, per candidate:
 * - `opted_out` when the user turned it off and the policy lets the user's "off" win (never for
 *   the transactional tier or a mandatory type), whether the request named it or not;
 * - `digest` when the type digests at this tier;
 * - `send` otherwise.
 *
 * When the preferences cannot be read (the store is down and nothing is cached), the seed's
 * conservative default applies: a request naming no channels goes to push only; named channels
 * are kept, and the delivery worker's check before the provider call (policy/gate.ts) holds any
 * e-mail or SMS of a non-transactional send until the preferences can be read again.
 */
import type { ChannelName } from '../channels/channel.js';
import type { PreferenceDoc } from '../preferences/document.js';
import type { Policy } from './table.js';
import type { NotificationType } from './types.js';

export type ChannelFate = 'send' | 'opted_out' | 'digest';

export interface ChannelPlan {
  channel: ChannelName;
  fate: ChannelFate;
}

export interface PlanInput {
  requested: readonly ChannelName[];
  type: NotificationType;
  policy: Policy;
  /** The user's preferences; `unavailable` when they could not be read. */
  prefs: PreferenceDoc | 'unavailable';
}

/** The user's explicit choice for a type's channel (undefined: none). */
export function userChoice(prefs: PreferenceDoc, type: string, channel: ChannelName): boolean | undefined {
  return prefs.types[type]?.[channel];
}

export function planChannels(i: PlanInput): ChannelPlan[] {
  const { type, policy } = i;
  const allowed = (c: ChannelName): boolean => policy.allowed.has(c);
  const fateOf = (): ChannelFate => (policy.digest ? 'digest' : 'send');
  if (i.prefs === 'unavailable') {
    const chosen = i.requested.length > 0 ? i.requested.filter(allowed) : policy.optOut ? ['push' as const] : defaults(type, allowed);
    return chosen.map((channel) => ({ channel, fate: fateOf() }));
  }
  const prefs = i.prefs;
  let candidates: ChannelName[];
  if (i.requested.length > 0) candidates = i.requested.filter(allowed);
  else {
    const on = new Set<ChannelName>();
    for (const c of type.channels) if (allowed(c)) on.add(c);
    for (const [c, v] of Object.entries(prefs.types[type.name] ?? {}) as [ChannelName, boolean][]) if (v && allowed(c)) on.add(c);
    candidates = [...on];
    if (candidates.length === 0) candidates = ['push'];
  }
  return candidates.map((channel) => ({
    channel,
    fate: policy.optOut && userChoice(prefs, type.name, channel) === false ? 'opted_out' : fateOf(),
  }));
}

function defaults(type: NotificationType, allowed: (c: ChannelName) => boolean): ChannelName[] {
  const out = [...type.channels].filter(allowed);
  return out.length > 0 ? out : ['push'];
}
