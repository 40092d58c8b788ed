/**
 * The notifier's operator API as the notifications, dead-letter, templates and notification-type
 * pages use it (README: "Tracking", "Looking a notification up", "Dead-letter queue",
 * "Templates", "Notification types, preferences and policies").
 */
import { seg, type ServiceClient } from './client.js';

export const CHANNELS = ['push', 'email', 'sms', 'in_app'] as const;
export type Channel = (typeof CHANNELS)[number];

export interface ChannelDetail {
  status: string;
  reason?: string;
  /** Epoch seconds. */
  release_at?: number;
  notification_type?: string;
}

export interface StatusView {
  status: string;
  channels: Record<string, string>;
  details: Record<string, ChannelDetail>;
  campaign?: Record<string, unknown>;
}

export interface AdminNotification {
  id: string;
  recipient_id: string | null;
  segment_id?: string | null;
  caller: string;
  event_type: string;
  notification_type: string | null;
  priority: string;
  template_id: string;
  requested_channels: string[];
  campaign_id: string | null;
  /** Epoch seconds. */
  created_at: number;
  status_view: StatusView;
}

export async function getNotification(c: ServiceClient, id: string): Promise<AdminNotification | undefined> {
  const r = await c.get<AdminNotification>(`/api/v1/admin/notifications/${seg(id)}`, { accept: [404] });
  return r.status === 404 ? undefined : r.data;
}

export async function notificationsOf(
  c: ServiceClient,
  userId: string,
  o: { cursor?: string; limit?: number } = {},
): Promise<{ notifications: AdminNotification[]; next_cursor: string | null }> {
  return (
    await c.get<{ notifications: AdminNotification[]; next_cursor: string | null }>('/api/v1/admin/notifications', {
      query: { user_id: userId, cursor: o.cursor, limit: o.limit },
    })
  ).data;
}

/** The delivery states the activity list filters on (notifier/admin/notifications.ts FILTER_STATUSES). */
export const ACTIVITY_STATUSES = [
  'queued',
  'sent',
  'delivered',
  'opened',
  'read',
  'failed',
  'dead_lettered',
  'opted_out',
  'capped',
  'digest',
  'cancelled',
  'bounced',
  'complained',
  'undelivered',
  'suppressed',
] as const;

/** Everyone's notifications, newest first, filtered (the recent-activity page). */
export async function recentNotifications(
  c: ServiceClient,
  q: { notificationType?: string; channel?: string; status?: string; cursor?: string; limit?: number },
): Promise<{ notifications: AdminNotification[]; next_cursor: string | null }> {
  return (
    await c.get<{ notifications: AdminNotification[]; next_cursor: string | null }>('/api/v1/admin/notifications', {
      query: { notification_type: q.notificationType, channel: q.channel, status: q.status, cursor: q.cursor, limit: q.limit },
    })
  ).data;
}

export interface DeadLetter {
  id: string;
  delivery_id: string;
  notification_id: string;
  recipient_id: string;
  template_id: string;
  channel: Channel;
  priority: string;
  reason: string;
  detail: string | null;
  attempts: number;
  created_at: number;
  redriven_at?: number;
  redriven_by?: string;
  delivery_status: string;
}

export type RedriveOutcome = 'redriven' | 'already_redriven' | 'not_dead_lettered' | 'not_found';

export interface RedriveResult {
  id: string;
  delivery_id?: string;
  result: RedriveOutcome;
}

export async function listDeadLetters(
  c: ServiceClient,
  q: { channel?: string; reason?: string; all?: boolean; cursor?: string; limit?: number },
): Promise<{ dead_letters: DeadLetter[]; next_cursor: string | null }> {
  return (
    await c.get<{ dead_letters: DeadLetter[]; next_cursor: string | null }>('/api/v1/admin/dlq', {
      query: { channel: q.channel, reason: q.reason, all: q.all ? 'true' : undefined, cursor: q.cursor, limit: q.limit },
    })
  ).data;
}

export async function getDeadLetter(c: ServiceClient, id: string): Promise<DeadLetter | undefined> {
  const r = await c.get<DeadLetter>(`/api/v1/admin/dlq/${seg(id)}`, { accept: [404] });
  return r.status === 404 ? undefined : r.data;
}

/** Re-drives the entries named, or the oldest `limit` open entries of a channel. */
export async function redrive(c: ServiceClient, what: { ids: string[] } | { channel: string; limit: number }): Promise<RedriveResult[]> {
  return (await c.post<{ results: RedriveResult[] }>('/api/v1/admin/dlq', what)).data.results;
}

export interface TemplateSummary {
  template_id: string;
  name: string;
  version: number;
  default_locale: string;
  used: boolean;
  locales: string[];
  channels: string[];
  description?: string;
  created_at?: number;
  updated_at?: number;
}

export interface Template extends TemplateSummary {
  variant_ids?: string[];
  /** locale → channel → part → text. */
  variants: Record<string, Record<string, Record<string, string>>>;
}

export async function listTemplates(
  c: ServiceClient,
  q: { name?: string; cursor?: string; limit?: number },
): Promise<{ templates: TemplateSummary[]; next_cursor: string | null }> {
  const r = await c.get<{ templates: TemplateSummary[]; next_cursor?: string | null }>('/api/v1/admin/templates', {
    query: { name: q.name, cursor: q.cursor, limit: q.limit },
  });
  return { templates: r.data.templates, next_cursor: r.data.next_cursor ?? null };
}

export async function getTemplate(c: ServiceClient, id: string): Promise<Template | undefined> {
  const r = await c.get<Template>(`/api/v1/admin/templates/${seg(id)}`, { accept: [404] });
  return r.status === 404 ? undefined : r.data;
}

/** What one channel would send (`subject`/`text`/`html` for e-mail, `title`/`body` for push, …). */
export type Rendered = Record<string, unknown> & { channel?: string; locale?: string };

export async function renderTemplate(
  c: ServiceClient,
  id: string,
  body: { channel: string; locale?: string; template_data: Record<string, unknown> },
): Promise<Rendered> {
  return (await c.post<Rendered>(`/api/v1/admin/templates/${seg(id)}/render`, body)).data;
}

export interface TierPolicy {
  allowed_channels: string[];
  opt_out: boolean;
  caps: unknown;
  quiet_hours: boolean;
  digest: unknown;
}

export interface NotificationTypeView {
  name: string;
  events: string[];
  channels: string[];
  mandatory: boolean;
  sms: unknown;
  caps: Record<string, { limit: number; window: string }>;
  digest: { window: string; template: string; max_items: number } | null;
  failover: Record<string, string[]>;
  policies: Record<string, TierPolicy>;
}

export async function notificationTypes(c: ServiceClient): Promise<NotificationTypeView[]> {
  return (await c.get<{ notification_types: NotificationTypeView[] }>('/api/v1/admin/notification-types')).data.notification_types;
}
