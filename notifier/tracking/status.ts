/**
 * The status view of a notification (GET /api/v1/notifications/{id}/status): each channel's status
 * and the overall one (states.ts). Before routing has created the deliveries, the channels the
 * notification will use show `queued`.
 */
import { create } from '@bufbuild/protobuf';
import type { Pool } from '../../shared/db.js';
import { StatusViewSchema, type StatusView } from '../../proto/gen/notify/v1/notify_pb.js';
import type { ChannelName } from '../queues/names.js';
import { resolveChannels } from '../workers/route.js';
import { channelStatus, overallStatus, type DeliveryStatus, type VisibleStatus } from './states.js';

export interface NotificationStatus {
  view: StatusView;
  /** Who may see it: the sender and the recipient (besides service roles). */
  caller: string;
  recipientId: string;
}

export async function notificationStatus(pool: Pool, id: string): Promise<NotificationStatus | undefined> {
  const { rows } = await pool.query<{
    caller: string;
    recipient_id: string;
    channels: ChannelName[];
    deliveries: [ChannelName, DeliveryStatus][] | null;
  }>(
    `SELECT n.caller, n.recipient_id, n.channels,
            (SELECT json_agg(json_build_array(d.channel, d.status)) FROM deliveries d WHERE d.notification_id = n.id) AS deliveries
       FROM notifications n WHERE n.id = $1`,
    [id],
  );
  const n = rows[0];
  if (!n) return undefined;
  const byChannel = new Map<string, DeliveryStatus[]>();
  if (n.deliveries && n.deliveries.length > 0) {
    for (const [channel, status] of n.deliveries) byChannel.set(channel, [...(byChannel.get(channel) ?? []), status]);
  } else {
    for (const channel of resolveChannels(n.channels)) byChannel.set(channel, ['queued']);
  }
  const channels: Record<string, VisibleStatus> = {};
  for (const [channel, statuses] of byChannel) channels[channel] = channelStatus(statuses);
  return {
    view: create(StatusViewSchema, { status: overallStatus(Object.values(channels)), channels }),
    caller: n.caller,
    recipientId: n.recipient_id,
  };
}
