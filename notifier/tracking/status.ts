/**
 * The status view of a notification (GET /api/v1/notifications/{id}/status): each channel's
 * status, the overall one (states.ts), and per channel why it is there and, for a hold, when it is
 * released (`details`). A digest's item shows its digest send's state. Before routing has created
 * the deliveries, the channels the request named (or push) show `queued`. An audience request
 * shows its fan-out's progress instead (notifier/campaigns/progress.ts).
 */
import { create } from '@bufbuild/protobuf';
import type { Pool } from '../../shared/db.js';
import { ChannelDetailSchema, StatusViewSchema, type ChannelDetail, type StatusView } from '../../proto/gen/notify/v1/notify_pb.js';
import type { ChannelName, Tier } from '../queues/names.js';
import { highest, overallStatus, visible, type DeliveryStatus, type VisibleStatus } from './states.js';
import { campaignStatus, countsOf, fanoutOf, progressOf } from '../campaigns/progress.js';

export interface NotificationStatus {
  view: StatusView;
  /** Who may see it: the sender and the recipient (besides service roles). */
  caller: string;
  /** Null for an audience request (only its sender and service roles see it). */
  recipientId: string | null;
}

interface DeliveryRow {
  channel: ChannelName;
  priority: Tier;
  status: DeliveryStatus;
  hold_reason: string | null;
  release_ms: number | null;
  last_error: string | null;
  notification_type: string | null;
  /** For a digest's item: its digest send's. */
  digest_status: DeliveryStatus | null;
  digest_hold: string | null;
  digest_release_ms: number | null;
  digest_last_error: string | null;
}

/**
 * @param deferred whether this replica is holding back a tier under backpressure (queues/backpressure.ts):
 *   a queued delivery of that tier says so in its reason (`low` is shed first, never dropped).
 */
export async function notificationStatus(
  pool: Pool,
  id: string,
  deferred: (tier: Tier) => boolean = () => false,
): Promise<NotificationStatus | undefined> {
  const { rows } = await pool.query<{
    caller: string;
    recipient_id: string | null;
    segment_id: string | null;
    channels: ChannelName[];
    notification_type: string | null;
    priority: Tier;
    deliveries: DeliveryRow[] | null;
  }>(
    `SELECT n.caller, n.recipient_id, n.segment_id, n.channels, n.notification_type, n.priority,
            CASE WHEN n.segment_id IS NULL THEN (SELECT json_agg(json_build_object(
                      'channel', d.channel, 'priority', d.priority, 'status', d.status, 'hold_reason', d.hold_reason,
                      'release_ms', extract(epoch FROM d.next_attempt_at) * 1000, 'last_error', d.last_error,
                      'notification_type', d.notification_type,
                      'digest_status', s.status, 'digest_hold', s.hold_reason,
                      'digest_release_ms', extract(epoch FROM s.next_attempt_at) * 1000, 'digest_last_error', s.last_error))
               FROM deliveries d
               LEFT JOIN digests g ON d.status = 'digested' AND g.id = d.digest_id
               LEFT JOIN deliveries s ON s.id = g.delivery_id
              WHERE d.notification_id = n.id AND d.kind = 'single') END AS deliveries
       FROM notifications n WHERE n.id = $1`,
    [id],
  );
  const n = rows[0];
  if (!n) return undefined;
  if (n.segment_id !== null) {
    // An audience request: its fan-out's counters, not its (possibly millions of) deliveries.
    const f = await fanoutOf(pool, id);
    if (!f) return undefined;
    const counts = (await countsOf(pool, [id])).get(id)!;
    const { status, channels, details } = campaignStatus(f, counts);
    return {
      view: create(StatusViewSchema, { status, channels, details, campaign: progressOf(f, counts) }),
      caller: n.caller,
      recipientId: null,
    };
  }
  const byChannel = new Map<string, { state: VisibleStatus; detail: ChannelDetail }[]>();
  const type = n.notification_type ?? undefined;
  if (n.deliveries && n.deliveries.length > 0) {
    for (const d of n.deliveries) {
      const entry = shown(d, type, deferred);
      byChannel.set(d.channel, [...(byChannel.get(d.channel) ?? []), entry]);
    }
  } else {
    for (const channel of n.channels.length > 0 ? n.channels : ['push']) {
      const reason = deferred(n.priority) ? deferredReason(n.priority) : undefined;
      byChannel.set(channel, [{ state: 'queued', detail: detailOf('queued', { notificationType: type, reason }) }]);
    }
  }
  const channels: Record<string, VisibleStatus> = {};
  const details: Record<string, ChannelDetail> = {};
  for (const [channel, entries] of byChannel) {
    const state = highest(entries.map((e) => e.state));
    channels[channel] = state;
    details[channel] = entries.find((e) => e.state === state)!.detail;
  }
  return {
    view: create(StatusViewSchema, { status: overallStatus(Object.values(channels)), channels, details }),
    caller: n.caller,
    recipientId: n.recipient_id,
  };
}

/** End states whose last error says why (a provider's feedback and its error code among them). */
const ENDED_WITH_REASON: ReadonlySet<DeliveryStatus> = new Set<DeliveryStatus>([
  'failed',
  'dead_lettered',
  'opted_out',
  'capped',
  'bounced',
  'complained',
  'undelivered',
  'suppressed',
]);

/** One delivery as shown: its state, with why and until when. */
function shown(
  d: DeliveryRow,
  type: string | undefined,
  deferred: (tier: Tier) => boolean,
): { state: VisibleStatus; detail: ChannelDetail } {
  const notificationType = d.notification_type ?? type;
  if (d.status === 'digested') {
    // Folded into a digest: the digest's send speaks for it.
    const s = d.digest_status ?? 'queued';
    const state =
      s === 'queued' || s === 'sending' ? (d.digest_hold === 'quiet_hours' && s === 'queued' ? 'quiet_hours' : 'digest') : visible(s);
    return {
      state,
      detail: detailOf(state, {
        reason: digestItemReason(state, d.digest_last_error),
        releaseMs: s === 'queued' ? d.digest_release_ms : null,
        notificationType,
      }),
    };
  }
  const state = visible(d.status, d.hold_reason);
  const held = d.status === 'queued' && d.hold_reason !== null;
  // The last error explains an end state, not a success after retries.
  const ended = ENDED_WITH_REASON.has(d.status);
  const waiting = d.status === 'queued' && !held && deferred(d.priority);
  const reason = held ? d.hold_reason! : ended ? (d.last_error ?? undefined) : waiting ? deferredReason(d.priority) : undefined;
  return {
    state,
    detail: detailOf(state, { reason: reason ?? undefined, releaseMs: held ? d.release_ms : null, notificationType }),
  };
}

function detailOf(
  status: VisibleStatus,
  o: { reason?: string | undefined; releaseMs?: number | null; notificationType?: string | undefined },
): ChannelDetail {
  const detail = create(ChannelDetailSchema, { status });
  if (o.reason !== undefined && o.reason !== '') detail.reason = o.reason;
  if (o.releaseMs !== undefined && o.releaseMs !== null) detail.releaseAt = o.releaseMs / 1000;
  if (o.notificationType !== undefined) detail.notificationType = o.notificationType;
  return detail;
}

function deferredReason(tier: Tier): string {
  return `deferred: the ${tier} tier waits while urgent queues are backed up`;
}

/** Why a digest's item is where its digest send is. */
function digestItemReason(state: VisibleStatus, sendError: string | null): string {
  switch (state) {
    case 'digest':
      return 'folded into a digest';
    case 'quiet_hours':
      return 'quiet_hours';
    case 'queued':
    case 'sent':
    case 'delivered':
    case 'opened':
    case 'read':
      return 'sent as part of a digest';
    default:
      // failed, dead_lettered, opted_out, capped: the digest send's own reason.
      return sendError ?? `the digest send is ${state}`;
  }
}
