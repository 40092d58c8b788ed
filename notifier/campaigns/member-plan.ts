/**
 * What a campaign's shard writes for one member: the policies of notifier/policy applied as the
 * member is expanded (channel resolution and the user's "off", quiet hours, caps), pure. The
 * delivery worker's claim checks them all again just before the provider call
 * (workers/claim.ts), so a preference changed after the expansion still wins, and the cap is
 * counted there, when the send happens.
 *
 * Decided for campaigns: a type's digest does not apply (a campaign is one message to many, not
 * many to one); its sends go out on their own.
 */
import type { ChannelName, Tier } from '../queues/names.js';
import { gate } from '../policy/gate.js';
import { planChannels } from '../policy/resolve.js';
import type { Policy } from '../policy/table.js';
import type { NotificationType } from '../policy/types.js';
import type { PreferenceDoc } from '../preferences/document.js';

export interface MemberDelivery {
  channel: ChannelName;
  status: 'queued' | 'opted_out' | 'capped';
  /** A queued delivery held until `nextMs` (the member's quiet hours). */
  hold?: 'quiet_hours';
  nextMs?: number;
  /** Why it is suppressed. */
  error?: string;
}

export interface MemberInput {
  requested: readonly ChannelName[];
  type: NotificationType;
  tier: Tier;
  policy: Policy;
  prefs: PreferenceDoc;
  timeZone: string | undefined;
  nowMs: number;
  /** Sends already counted in the cap's window for this member and channel. */
  counted: (channel: ChannelName) => number;
}

export function planMember(i: MemberInput): MemberDelivery[] {
  const out: MemberDelivery[] = [];
  for (const p of planChannels({ requested: i.requested, type: i.type, policy: i.policy, prefs: i.prefs })) {
    if (p.fate === 'opted_out') {
      out.push({ channel: p.channel, status: 'opted_out', error: `opted_out: the user turned ${p.channel} off for ${i.type.name}` });
      continue;
    }
    const x = gate({
      channel: p.channel,
      tier: i.tier,
      type: i.type,
      policy: i.policy,
      prefs: i.prefs,
      timeZone: i.timeZone,
      nowMs: i.nowMs,
      retryMs: 0,
    });
    switch (x.do) {
      case 'opt_out':
        out.push({ channel: p.channel, status: 'opted_out', error: `opted_out: ${x.detail}` });
        break;
      case 'hold':
        out.push({ channel: p.channel, status: 'queued', hold: 'quiet_hours', nextMs: x.untilMs });
        break;
      case 'cap':
        out.push(
          i.counted(p.channel) >= x.rule.limit
            ? { channel: p.channel, status: 'capped', error: `capped: over the ${i.type.name} ${p.channel} cap` }
            : { channel: p.channel, status: 'queued' },
        );
        break;
      case 'send':
        out.push({ channel: p.channel, status: 'queued' });
        break;
    }
  }
  return out;
}
