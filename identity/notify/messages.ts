/**
 * What the relay sends for an outbox row (pure): the notifier's `POST /api/v1/notifications` body.
 * The idempotency key is the row's id (`identity-outbox-<id>`), so a row sent again (a lost 202,
 * a crash before the row was marked, a replica taking over) is answered with the original 202 and
 * creates nothing (the notifier keeps keys NOTIFIER_IDEMPOTENCY_TTL, 24 h).
 */
import { SECURITY_ALERT_TEMPLATE, WELCOME_TEMPLATE } from './templates.js';

export interface OutboxRow {
  readonly id: string;
  readonly kind: string;
  readonly userId: string;
  readonly payload: Readonly<Record<string, unknown>>;
}

export type NotificationRequest = Record<string, unknown> & { idempotency_key: string };

export const idempotencyKey = (outboxId: string): string => `identity-outbox-${outboxId}`;

interface AlertText {
  readonly eventType: string;
  readonly title: string;
  readonly detail: (client: string) => string;
}

/** Each alert's event type (all under `security.`: the notifier's mandatory `security_alerts` type) and words. */
export const ALERTS: Readonly<Record<string, AlertText>> = Object.freeze({
  RefreshTokenReuseDetected: {
    eventType: 'security.refresh_token_reuse',
    title: 'A session of yours was signed out',
    detail: (client: string) =>
      `A sign-in token for ${client} was used again after it had been replaced, which can mean someone else has a copy. ` +
      'We signed that session out; sign in again. If you do not recognise this, change your password.',
  },
  AuthorizationCodeReuseDetected: {
    eventType: 'security.authorization_code_reuse',
    title: 'A sign-in was blocked',
    detail: (client: string) =>
      `A one-time sign-in code for ${client} was used twice, which can mean someone intercepted it. ` +
      'We revoked what it gave access to. If you do not recognise this, change your password.',
  },
  PasswordChanged: {
    eventType: 'security.password_changed',
    title: 'Your password was changed',
    detail: () => 'The password of your account was changed. If you did not do this, reset your password now.',
  },
});

const GENERIC: AlertText = {
  eventType: 'security.alert',
  title: 'Security alert',
  detail: () => 'Something unusual happened on your account. If you do not recognise it, change your password.',
};

function isoOf(epochSeconds: unknown): string {
  const s = typeof epochSeconds === 'number' ? epochSeconds : typeof epochSeconds === 'string' ? Number(epochSeconds) : NaN;
  return Number.isFinite(s) ? new Date(s * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z') : 'just now';
}

/** The notification for a row, or undefined for a kind the relay does not know (it parks the row). */
export function notificationFor(row: OutboxRow): NotificationRequest | undefined {
  const base = { recipient_id: row.userId, idempotency_key: idempotencyKey(row.id) };
  switch (row.kind) {
    case 'security_alert': {
      const alert = typeof row.payload.alert === 'string' ? row.payload.alert : '';
      const text = ALERTS[alert] ?? GENERIC;
      const client = typeof row.payload.client_id === 'string' && row.payload.client_id !== '' ? row.payload.client_id : 'an app';
      return {
        ...base,
        event_type: text.eventType,
        notification_type: 'security_alerts',
        template_id: SECURITY_ALERT_TEMPLATE,
        template_data: { title: text.title, detail: text.detail(client), when: isoOf(row.payload.at) },
        // Transactional: no quiet hours, caps or digests, and the type is mandatory besides.
        priority: 'transactional',
      };
    }
    case 'welcome': {
      const name = typeof row.payload.name === 'string' && row.payload.name.trim() !== '' ? row.payload.name : 'there';
      return {
        ...base,
        event_type: 'user.welcome',
        notification_type: 'general',
        template_id: WELCOME_TEMPLATE,
        template_data: { name },
        priority: 'normal',
        channels: ['email', 'in_app'],
      };
    }
    default:
      return undefined;
  }
}
