/**
 * The check just before a provider call (README, "Notification types, preferences and policies"):
 * what becomes of one claimed delivery, from its type × tier policy (table.ts), the user's
 * preferences as they are now, the user's time zone and the time. Pure; workers/claim.ts runs it
 * on every claimed delivery, under the user's preference lock, and records the decision.
 *
 * In order:
 * 1. exempt (the transactional tier, a mandatory type): send.
 * 2. preferences unreadable (store down, see cache.ts): push and in-app go ahead (the seed's
 *    conservative default, push only); e-mail and SMS are held (`preferences_unavailable`) and
 *    checked again after `retryMs`: never sent without knowing the user's choice, never dropped.
 * 3. the user turned the channel off for the type: `opted_out` (suppressed, final).
 * 4. inside the user's quiet hours (policy permitting): held (`quiet_hours`) until they end.
 * 5. the type caps this channel: the cap decides (workers/claim.ts counts the sliding window),
 *    unless the cap admitted this send before (a retry, or a takeover after a crash).
 * 6. send.
 */
import type { ChannelName, Tier } from '../channels/channel.js';
import type { PreferenceDoc } from '../preferences/document.js';
import { parseClockTime, quietHoursRelease } from './quiet-hours.js';
import { userChoice } from './resolve.js';
import type { Policy } from './table.js';
import type { CapRule, NotificationType } from './types.js';

export type HoldReason = 'quiet_hours' | 'digest' | 'preferences_unavailable';

export type GateDecision =
  { do: 'send' } | { do: 'opt_out'; detail: string } | { do: 'hold'; reason: HoldReason; untilMs: number } | { do: 'cap'; rule: CapRule };

export interface GateInput {
  channel: ChannelName;
  tier: Tier;
  type: NotificationType;
  policy: Policy;
  prefs: PreferenceDoc | 'unavailable';
  /** The profile's IANA zone; UTC when unknown. */
  timeZone: string | undefined;
  nowMs: number;
  /** When to look again at a send held because the preferences could not be read. */
  retryMs: number;
  /**
   * The send was admitted by its cap before (it is being retried, or taken over after a crash):
   * it is not counted again.
   */
  alreadyCounted?: boolean;
}

export function gate(i: GateInput): GateDecision {
  const { policy } = i;
  if (!policy.optOut) return { do: 'send' };
  if (i.prefs === 'unavailable') {
    if (i.channel === 'email' || i.channel === 'sms')
      return { do: 'hold', reason: 'preferences_unavailable', untilMs: i.nowMs + i.retryMs };
    return capOrSend(i);
  }
  if (userChoice(i.prefs, i.type.name, i.channel) === false) {
    return { do: 'opt_out', detail: `the user turned ${i.channel} off for ${i.type.name}` };
  }
  const quiet = i.prefs.quiet_hours;
  if (policy.quietHours && quiet) {
    const startMin = parseClockTime(quiet.start);
    const endMin = parseClockTime(quiet.end);
    if (startMin !== undefined && endMin !== undefined && startMin !== endMin) {
      const until = quietHoursRelease(i.nowMs, i.timeZone ?? 'UTC', { startMin, endMin });
      if (until !== undefined) return { do: 'hold', reason: 'quiet_hours', untilMs: until };
    }
  }
  return capOrSend(i);
}

function capOrSend(i: GateInput): GateDecision {
  const rule = i.policy.caps && !i.alreadyCounted ? i.type.caps[i.channel] : undefined;
  return rule ? { do: 'cap', rule } : { do: 'send' };
}

/**
 * The cap's verdict for the sends of one (user, type, channel) key in a claimed batch, in order:
 * `counted` already in the window, `oldestMs` the oldest of them. Each admitted send is counted;
 * a refused one is told when the window next frees a slot. Pure.
 */
export function capVerdicts(
  n: number,
  counted: number,
  oldestMs: number | undefined,
  rule: CapRule,
  nowMs: number,
): { admit: boolean; freeAtMs?: number }[] {
  const out: { admit: boolean; freeAtMs?: number }[] = [];
  let used = counted;
  for (let k = 0; k < n; k++) {
    if (used < rule.limit) {
      used++;
      out.push({ admit: true });
    } else {
      out.push({ admit: false, freeAtMs: (oldestMs ?? nowMs) + rule.windowMs });
    }
  }
  return out;
}
